"""The campaign state machine and the policies that choose the next transform."""
