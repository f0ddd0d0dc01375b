"""The `tracking` section: the run's directory, the console, completions logging and the experiment trackers."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from rlvr.config.base import Section


class WandbSettings(Section):
    """Weights & Biases (the 'wandb' extra)."""

    entity: str | None = Field(None, description="Team or user the run belongs to (default: your W&B default).")
    mode: Literal["online", "offline", "disabled"] | None = Field(
        None, description="offline: write the run under `dir` only (upload later with `wandb sync`); default: "
        "WANDB_MODE, else online.")
    dir: str | None = Field(None, description="Where the wandb/ folder goes (default: tracking.output_dir).")
    group: str | None = Field(None, description="W&B run group (e.g. one sweep or seed family).")


class MlflowSettings(Section):
    """MLflow (the 'mlflow' extra: mlflow-skinny)."""

    tracking_uri: str | None = Field(
        None, description="A tracking server (http://...), a database (sqlite:///...) or a file store "
        "(file:/path); default: MLFLOW_TRACKING_URI, else a file store at <tracking.output_dir>/mlruns.")
    experiment: str | None = Field(None, description="Experiment name (default: tracking.project).")


class TrackioSettings(Section):
    """trackio (the 'trackio' extra): a local SQLite store, or a Hugging Face Space."""

    dir: str | None = Field(None, description="Local store (TRACKIO_DIR; default: trackio's, under HF_HOME). "
                            "`TRACKIO_DIR=<dir> trackio show` opens the dashboard.")
    space_id: str | None = Field(None, description="Log to this Hugging Face Space instead of locally.")
    group: str | None = Field(None, description="trackio run group.")


class TrackingConfig(Section):
    """Where a run's logs go: metrics.jsonl and completions.jsonl always, the console, and the sinks of
    `report_to` (docs/tracking.md)."""

    output_dir: str = Field("runs/default", description="The run's directory: config.yaml, metrics.jsonl, "
                            "completions.jsonl, report.html, checkpoints/, tensorboard/.")
    console: bool = Field(True, description="Print the start banner, progress and end summary.")
    log_every: int = Field(10, gt=0, description="When output is not a terminal (a file, a pipe, Slurm): print a "
                           "plain progress line every this many steps, and at the first and last step.")
    tensorboard: Literal["auto", "on", "off"] = Field(
        "auto", description="auto: TensorBoard event files when tensorboard is installed; on: always (error when "
        "it is missing); off: never. Listing tensorboard in report_to means on.")
    report_to: list[Literal["tensorboard", "wandb", "mlflow", "trackio"]] = Field(
        default_factory=list, description="Experiment trackers the run logs to (each an optional extra): the "
        "resolved config as parameters, every metric row, and the sampled completions as a table.")
    project: str = Field("rlvr", description="Project (W&B, trackio) or experiment (MLflow) name.")
    run_name: str | None = Field(None, description="Run name in the trackers (default: the output directory's name).")
    tags: list[str] = Field(default_factory=list, description="Tags for the run (W&B tags, MLflow tags).")
    log_completions_every: int = Field(
        10, ge=0, description="Write sampled completions to <output_dir>/completions.jsonl (and the trackers) every "
        "this many steps and at the last step; 0: never.")
    log_completions_groups: int = Field(2, gt=0, description="Prompt groups (all their samples) logged each time.")
    report: bool = Field(True, description="Write <output_dir>/report.html at the end of the run (rlvr report).")
    stall_warning_s: float = Field(60.0, ge=0, description="When nothing has progressed for this many seconds (no "
                                   "token generated, reward scored or loaded, micro-batch trained, collective done), "
                                   "print one line saying what the run is waiting for and since when, then again each "
                                   "time the silence doubles; 0: never.")
    wandb: WandbSettings = WandbSettings()
    mlflow: MlflowSettings = MlflowSettings()
    trackio: TrackioSettings = TrackioSettings()

    @model_validator(mode="after")
    def _tensorboard_not_contradicted(self) -> TrackingConfig:
        if "tensorboard" in self.report_to and self.tensorboard == "off":
            raise ValueError("tracking.report_to lists tensorboard but tracking.tensorboard is 'off'; drop one")
        return self

    def sinks(self) -> list[str]:
        """The trackers this run logs to besides metrics.jsonl and the console, tensorboard resolved."""
        names = [n for n in dict.fromkeys(self.report_to) if n != "tensorboard"]
        if "tensorboard" in self.report_to or self.tensorboard == "on":
            return ["tensorboard", *names]
        if self.tensorboard == "auto":
            import importlib.util

            if importlib.util.find_spec("tensorboard") is not None:
                return ["tensorboard", *names]
        return names
