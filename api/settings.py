"""The service's configuration: environment variables ``TENSORTUNE_*`` (pydantic-settings),
overridable by ``tensortune serve`` flags. Never edited in code."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tuner import is_loopback

__all__ = ["Settings", "is_loopback"]


class Settings(BaseSettings):
    """Settings of one API server (each field is also ``TENSORTUNE_<NAME>``)."""

    model_config = SettingsConfigDict(env_prefix="TENSORTUNE_", extra="ignore")

    db_url: str | None = Field(
        None, description="database URL; default $TENSORTUNE_HOME/tuning.db")
    ray_address: str | None = Field(
        None, description="measure on this Ray cluster (host:port) instead of this machine")
    auth: bool = Field(
        True, description="require bearer tokens; off only for local use (loopback only)")
    token_cache_s: float = Field(
        5.0, ge=0, description="how long a verified token is trusted without a database "
                               "probe (a token revoked by another process works that long)")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    run_jobs: bool = Field(
        True, description="run submitted jobs in this server (False: only queue them)")
    max_running_jobs: int = Field(4, ge=1, le=64, description="jobs tuned at once")
    max_trials: int = Field(20_000, ge=1, description="largest trial budget of one job")
    max_timeout_s: float = Field(
        600.0, gt=0, description="largest compile/load/run timeout a job may ask for")
    max_body_bytes: int = Field(
        1 << 20, ge=1024, description="largest request body, except record imports")
    max_import_bytes: int = Field(256 << 20, ge=1024, description="largest record import")
    max_model_bytes: int = Field(256 << 20, ge=1024, description="largest model upload")
    model_import_timeout_s: float = Field(
        300.0, gt=0, description="how long importing an uploaded model (in the sandbox) "
                                 "may take")
    max_model_imports: int = Field(2, ge=1, le=64,
                                   description="model uploads imported at once")
    submit_rate_per_minute: int = Field(
        30, ge=1, description="job submissions per token and minute")
    dedupe_window_s: float = Field(
        30.0, ge=0, description="an identical submission by one token within it is a repeat")
