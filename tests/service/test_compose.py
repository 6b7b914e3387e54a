"""docker-compose.yml, docker-compose.gpu.yml and the Dockerfile, checked by parsing (the run of
the stack on an engine is in docs/SERVICE.md)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from repo import ROOT


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_every_service_is_there(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"postgres", "redis", "migrate", "api", "agent",
                                        "compile", "gpu", "flower"}
    assert set(compose["volumes"]) >= {"pgdata", "tuneforge-home"}


def test_datastores_have_healthchecks(compose: dict[str, Any]) -> None:
    for name in ("postgres", "redis", "api"):
        check = compose["services"][name]["healthcheck"]
        assert check["test"]
        assert check["retries"] >= 3
    assert "pg_isready" in " ".join(compose["services"]["postgres"]["healthcheck"]["test"])


def test_start_order_waits_for_health_and_migrations(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["migrate"]["command"] == ["tuneforge", "admin", "migrate"]
    assert services["migrate"]["restart"] == "no"
    for name in ("api", "agent", "compile", "gpu"):
        deps = services[name]["depends_on"]
        assert deps["migrate"] == {"condition": "service_completed_successfully"}, name
        assert deps["redis"] == {"condition": "service_healthy"}, name
        env = services[name]["environment"]
        assert env["TUNEFORGE_DATABASE_URL"].startswith("postgresql+psycopg://")
        assert env["TUNEFORGE_REDIS_URL"] == "redis://redis:6379/0"


def test_workers_take_their_queues(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["agent"]["command"][:4] == ["tuneforge", "worker", "--role", "agent"]
    assert services["compile"]["command"][:4] == ["tuneforge", "worker", "--role", "compile"]
    assert "--role gpu" in services["gpu"]["command"][-1]
    assert services["api"]["command"][:2] == ["tuneforge", "serve"]


def test_without_the_gpu_file_no_service_reserves_a_device(compose: dict[str, Any]) -> None:
    """``TUNEFORGE_BACKEND=replay docker compose up`` on a host without the NVIDIA container
    toolkit: Docker refuses to create a container that reserves NVIDIA devices."""
    for name, service in compose["services"].items():
        assert "deploy" not in service, name
        assert "devices" not in service, name
        assert "runtime" not in service, name


def test_the_gpu_file_gives_the_gpu_worker_every_nvidia_device() -> None:
    override = yaml.safe_load((ROOT / "docker-compose.gpu.yml").read_text())
    assert set(override["services"]) == {"gpu"}
    devices = override["services"]["gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    text = (ROOT / "docker-compose.yml").read_text()
    assert "docker-compose.gpu.yml" in text  # the header says how to use it


def test_flower_is_optional(compose: dict[str, Any]) -> None:
    assert compose["services"]["flower"]["profiles"] == ["monitoring"]
    for name, service in compose["services"].items():
        if name != "flower":
            assert "profiles" not in service, name


def test_dockerfile_installs_the_project_with_its_migrations() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "COPY migrations migrations" in text
    assert 'pip install --no-cache-dir -e ".${EXTRAS:+[$EXTRAS]}"' in text  # EXTRAS= works
    assert "USER tuneforge" in text
