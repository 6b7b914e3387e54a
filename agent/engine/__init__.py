"""The campaign state machine over database rows; transport-agnostic.

The campaign driver (:mod:`agent.driver`) calls them for both deliveries, embedded mode's
threads (:mod:`agent.embedded`) and the service's Celery tasks (:mod:`agent.tasks`); each
lives in the module that holds its concern:

- :mod:`agent.engine.lifecycle` — a campaign from its spec to its end: create, start (the
  baseline first), budgets, finish, cancel, injected actions;
- :mod:`agent.engine.proposing` — the next candidates from the policy, under the campaign's
  row lock (two results arriving together never produce a double step);
- :mod:`agent.engine.recording` — idempotent result writes, then the decision (accept above the
  threshold with confidence, otherwise revert to the incumbent), the feedback record, the
  budgets and the end of the campaign;
- :mod:`agent.engine.acceptance` — the acceptance rule, a pure function of the times;
- :mod:`agent.engine.history` — the candidates as a policy sees them, read incrementally;
- :mod:`agent.engine.locking` — the row lock, the events, and what one transaction notes down.

Every decision and its reason is stored with the candidate and as an event, so the decision
chain can be read back and replayed.
"""
