"""One home for configuration: defaults, environment variables, validation.

Every setting has a default that works on a single GPU machine; production
overrides addresses and credentials through the environment (see README's
configuration table).  Secrets are read here and never copied into workflow
inputs or history.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr

ENV_PREFIX = "KERNELOPT_"


def _env(name: str) -> str | None:
    value = os.environ.get(ENV_PREFIX + name)
    return value if value not in (None, "") else None


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    home: Path = Field(default_factory=lambda: Path.home() / ".kernelopt")
    temporal_address: str | None = None  # None: the embedded dev server
    namespace: str = "kernelopt"
    retention_days: int = 365
    tls: bool | None = None  # None: the SDK decides (on when an API key is given)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    api_key: SecretStr | None = None
    server_port: int = 7233
    ui_port: int = 8233
    cpu_queue: str = "kernelopt-cpu"
    gpu_queue: str | None = None  # None: derived from the local GPU's model
    gpu_model: str | None = None
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o"
    llm_api_key_env: str = "OPENAI_API_KEY"
    llm_temperature: float = 0.7
    llm_max_output_tokens: int = 8192  # the reply limit sent with every request
    # sync: one HTTP request per call; batch: a round's requests as one Batch API job;
    # folder: request files answered out of band (kernelopt pending / reply)
    llm_mode: str = "sync"  # checked where campaigns are built (kernelopt.cli.llm_replies)
    llm_folder: Path | None = None  # None: $KERNELOPT_HOME/llm (requests/, replies/)
    llm_poll_s: float = 60.0  # longest pause between checks for batch results or replies
    llm_wait_limit_s: float = 86400.0  # a batch or request unanswered this long ends the search
    log_json: bool = False
    log_level: str = "info"
    helion_effort: str = "quick"  # autotuning effort of a Helion problem's baseline
    zygote: bool = True  # GPU workers fork gate jobs from one preloaded process
    spare_child: bool = True  # GPU workers start each activity's process ahead of its job
    # activities one GPU worker runs at once; timed sections still take the GPU alone
    # (gates/gpu_lease.py), so more than one overlaps only untimed work
    gpu_slots: int = Field(default=1, ge=1, le=16)
    compiler_caches: Path | None = None  # None: $KERNELOPT_HOME/compiler-caches
    sandbox: bool = True  # gate children run in bubblewrap (gates/sandbox.py); off: unsandboxed
    shared_group: bool = False  # artifacts 0640 / dirs 02770 instead of 0600 / 0700
    # the time-limited CPU import of a problem before anything is submitted
    # (kernelopt.preflight_problem reads the variable itself: it runs before settings load)
    preflight_seconds: float = 90.0
    # opt-in: the built-in proposer may change how cuBLAS/cuDNN calls run (changes f;
    # kernelopt.proposer.library); read where the proposer runs, on the workers
    library_choices: bool = False
    # what a GPU worker keeps of shared reference bundles (gates/reference_cache.py)
    reference_cache_bundles: int = 4
    reference_cache_mib: int = 4096

    @property
    def embedded(self) -> bool:
        return self.temporal_address is None

    @property
    def address(self) -> str:
        return self.temporal_address or f"127.0.0.1:{self.server_port}"

    @property
    def artifacts_dir(self) -> Path:
        return self.home / "artifacts"

    @property
    def server_dir(self) -> Path:
        return self.home / "server"

    @property
    def llm_dir(self) -> Path:
        """Reply-folder mode's requests/ and replies/, and the learned endpoint quirks."""
        return self.llm_folder or self.home / "llm"

    @property
    def compiler_caches_dir(self) -> Path:
        """Where each GPU worker keeps its own Triton and Inductor caches."""
        return self.compiler_caches or self.home / "compiler-caches"

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        values: dict[str, object] = {}
        mapping = {
            "HOME": "home",
            "TEMPORAL_ADDRESS": "temporal_address",
            "NAMESPACE": "namespace",
            "RETENTION_DAYS": "retention_days",
            "TLS": "tls",
            "TLS_CERT": "tls_cert",
            "TLS_KEY": "tls_key",
            "TLS_CA": "tls_ca",
            "API_KEY": "api_key",
            "SERVER_PORT": "server_port",
            "UI_PORT": "ui_port",
            "CPU_QUEUE": "cpu_queue",
            "GPU_QUEUE": "gpu_queue",
            "GPU_MODEL": "gpu_model",
            "LLM_BASE_URL": "llm_base_url",
            "LLM_MODEL": "llm_model",
            "LLM_API_KEY_ENV": "llm_api_key_env",
            "LLM_TEMPERATURE": "llm_temperature",
            "LLM_MAX_OUTPUT_TOKENS": "llm_max_output_tokens",
            "LLM_MODE": "llm_mode",
            "LLM_FOLDER": "llm_folder",
            "LLM_POLL_S": "llm_poll_s",
            "LLM_WAIT_LIMIT_S": "llm_wait_limit_s",
            "LOG_JSON": "log_json",
            "LOG_LEVEL": "log_level",
            "HELION_EFFORT": "helion_effort",
            "ZYGOTE": "zygote",
            "SPARE_CHILD": "spare_child",
            "GPU_SLOTS": "gpu_slots",
            "COMPILER_CACHES": "compiler_caches",
            "SANDBOX": "sandbox",
            "SHARED_GROUP": "shared_group",
            "PREFLIGHT_SECONDS": "preflight_seconds",
            "LIBRARY_CHOICES": "library_choices",
            "REFERENCE_CACHE_BUNDLES": "reference_cache_bundles",
            "REFERENCE_CACHE_MIB": "reference_cache_mib",
        }
        for env_name, field in mapping.items():
            value = _env(env_name)
            if value is not None:
                values[field] = value
        if "llm_base_url" not in values and os.environ.get("OPENAI_BASE_URL"):
            values["llm_base_url"] = os.environ["OPENAI_BASE_URL"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)
