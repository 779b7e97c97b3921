"""pytest fixtures for the real llama-server (import them into a test module).

Tests that use them skip, with the reason, when the binary is not built: building takes
tens of minutes (`make test-servers` or `python tests/servers/llama_build.py` does it once).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .llama_build import VERSION, built_binary
from .llama_server import LlamaServer, running

SHARED_TOKENIZER = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "tokenizers" / "llama-2" / "tokenizer.json"


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    path = built_binary()
    if path is None:
        pytest.skip(f"llama-server {VERSION} is not built: run `make test-servers` "
                    "(or python tests/servers/llama_build.py) once to build it")
    return path


@pytest.fixture(scope="session")
def llama2_tokenizer_json() -> Path:
    if not SHARED_TOKENIZER.is_file():
        pytest.skip("../shared/data/tokenizers/llama-2/tokenizer.json is not beside the checkout")
    return SHARED_TOKENIZER


@pytest.fixture(scope="session")
def tiny_llama2_gguf(tmp_path_factory: pytest.TempPathFactory, llama2_tokenizer_json: Path) -> Path:
    """The tiny random-weight model with the Llama-2 vocabulary, written once per session."""
    pytest.importorskip("gguf", reason="the gguf package (test extra) writes the model")
    from .tiny_gguf import write_model

    return write_model(llama2_tokenizer_json, tmp_path_factory.mktemp("gguf") / "tiny-llama2.gguf")


@pytest.fixture(scope="session")
def llama_server(llama_server_binary: Path, tiny_llama2_gguf: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-server serving the tiny model under Llama-2-chat's hub id, as a user's server of
    that model would list it in /v1/models (one slot of 4,096 tokens)."""
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with running(llama_server_binary, tiny_llama2_gguf, log, alias="meta-llama/Llama-2-7b-chat-hf") as server:
        yield server
