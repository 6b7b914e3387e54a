"""Settings read from the environment (prefix ``TUNEFORGE_``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_home() -> Path:
    return Path.home() / ".tuneforge"


class Settings(BaseSettings):
    """Every knob of tuneforge; defaults match ``docker-compose.yml`` and embedded use."""

    model_config = SettingsConfigDict(env_prefix="TUNEFORGE_", env_file=None, extra="ignore")

    home: Path = Field(default_factory=_default_home, description="cache and artifact root")
    database_url: str = Field(
        default="", description="SQLAlchemy URL; empty = SQLite file under home (embedded)"
    )
    redis_url: str = Field(default="redis://127.0.0.1:6379/0",
                           description="Redis: the Celery broker and the event feed")

    nvcc: str = Field(default="nvcc", description="nvcc executable (tests point it at a fake)")
    arch: str = Field(default="sm_90", description="the GPU arch candidates are compiled for")
    compile_timeout_s: float = Field(default=120.0, description="nvcc is killed after this long")
    compile_workers: int = Field(default=0, description="0 = one per CPU core")
    family_compile_check: bool = Field(
        default=True, description="compile a family's baseline and reference with nvcc when "
                                  "it is registered (refuse one that does not compile)")
    family_compile_timeout_s: float = Field(
        default=60.0, description="nvcc's limit per kernel when a family is registered (the "
                                  "check's whole child process gets twice this)")
    family_compile_memory_mib: int = Field(
        default=4096, description="address space of the registration's compile process and "
                                  "its nvcc (MiB)")
    nvcc_extra_flags: list[str] = Field(
        default_factory=list, description="flags added to every nvcc command (in the cache key)")

    eval_timeout_s: float = Field(default=60.0, description="watchdog for one GPU evaluation")
    compute_sanitizer: str = Field(
        default="compute-sanitizer", description="compute-sanitizer executable (the sanitizer "
                                                 "gate, `tuneforge sanitize`)")
    sanitize_timeout_s: float = Field(
        default=600.0, gt=0, description="time limit of one compute-sanitizer tool run")

    llm_url: str = Field(default="", description="OpenAI-compatible endpoint of the llm policy")
    llm_model: str = Field(default="", description="the model the llm policy asks")
    llm_api_key: str = Field(default="", description="the llm endpoint's key")
    llm_timeout_s: float = Field(default=60.0, description="time limit of one llm request")

    api_url: str = Field(default="http://127.0.0.1:8000",
                         description="the server the CLI's service commands talk to")
    api_key: str = Field(default="", description="the team's key for those commands")

    # ---- the distributed service (api/, Celery workers) ----
    backend: str = Field(
        default="gpu",
        description="evaluation backend of the service's GPU workers: gpu, or replay (recorded "
                    "measurements, no GPU); the API stamps it on every new campaign",
    )
    replay_speed: float = Field(
        default=0.0, description="replay workers sleep gpu_seconds / speed (0 = no sleep)"
    )
    worker_role: str = Field(default="", description="compile | gpu | agent (set by the CLI)")
    heartbeat_s: float = Field(default=5.0, description="worker heartbeat period")
    reconcile_s: float = Field(
        default=60.0, description="period of the agent's look for campaigns that lost their "
                                  "next step (and how long a running one must be quiet)",
    )
    sse_check_s: float = Field(
        default=10.0, gt=0, description="an event stream fed by Redis also reads the database "
                                        "this often (a publish that was lost)",
    )
    gpu_memory_gib: float = Field(
        default=80.0, description="GPU memory a campaign's buffers and their fp64 reference "
                                  "may take (bounds the accepted shapes)",
    )
    default_kernel: str = Field(
        default="gemm_bias_relu", description="the kernel family a campaign tunes when none "
                                              "is named",
    )
    max_parallel: int = Field(default=64, description="upper bound of a campaign's `parallel`")
    max_body_bytes: int = Field(
        default=1 << 20, ge=0, description="largest request body the API reads (larger: 413)",
    )
    max_header_bytes: int = Field(
        default=64 << 10, ge=4096, description="largest request line and headers `tuneforge "
                                               "serve` reads (larger: 400, connection closed)",
    )
    max_family_versions: int = Field(
        default=200, ge=1, description="family versions a team may store (retired ones count; "
                                       "more: 403)",
    )
    max_family_bytes: int = Field(
        default=64 << 20, ge=1, description="bytes a team's stored family specs may take "
                                            "together (more: 403)",
    )
    max_family_registrations_per_minute: int = Field(
        default=60, ge=0, description="family registrations (POST /families, refused ones "
                                      "too) a team may send a minute, counted by every API "
                                      "process together (more: 429; 0: no limit)",
    )
    operator_token: str = Field(
        default="", description="the operator's token (X-Operator-Token) for the fleet-wide "
                                "views: GET /workers and GET /metrics (empty: nobody sees them)",
    )

    @property
    def cache_dir(self) -> Path:
        """Where compiled cubins and their ptxas reports are cached."""
        return self.home / "cache"

    @property
    def effective_database_url(self) -> str:
        """The configured URL, or an SQLite file under ``home`` in embedded mode."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.home / 'tuneforge.db'}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once; tests call ``get_settings.cache_clear()``)."""
    return Settings()
