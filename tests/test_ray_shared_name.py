"""`--ray-shared-limiter NAME` without a cluster: what the limiter actor is called (the
key only as a digest), which runs share it, and bad input in one line. The sharing
itself, on a two-node cluster with two drivers: tests/test_ray_backend.py."""

from __future__ import annotations

import pytest

from asyncbench.config import RunConfig
from asyncbench.errors import UserError
from asyncbench.providers import parse_model_spec
from asyncbench.runners.ray_shared import PREFIX, actor_name, check_name

URLS = ["http://10.0.0.5:8000/v1"]


def test_the_name_separates_models_endpoints_and_keys_and_never_holds_the_key():
    spec = parse_model_spec("openai:gpt-4o-mini", URLS)
    name = actor_name("team", spec, "sk-secret-123")
    assert name.startswith(PREFIX + "team-") and "secret" not in name
    assert actor_name("team", parse_model_spec("openai:gpt-4o-mini", URLS), "sk-secret-123") == name  # another run
    others = {actor_name("team", spec, "sk-other"), actor_name("team", parse_model_spec("openai:gpt-4o", URLS), "sk-secret-123"),
              actor_name("team", parse_model_spec("openai:gpt-4o-mini", ["http://10.0.0.6:8000/v1"]), "sk-secret-123"),
              actor_name("other", spec, "sk-secret-123")}
    assert name not in others and len(others) == 4


@pytest.mark.parametrize("bad", ["", "has space", "x" * 65, "a/b"])
def test_a_bad_name_is_one_line(bad):
    with pytest.raises(UserError, match="--ray-shared-limiter"):
        check_name(bad)


def test_it_goes_with_the_ray_backend_only():
    with pytest.raises(UserError, match="--ray-shared-limiter goes with --backend ray"):
        RunConfig.build("minilongbench", "sim", {"ray_shared_limiter": "team"}).validate()
    RunConfig.build("minilongbench", "sim", {"backend": "ray", "ray_shared_limiter": "team"}).validate()
