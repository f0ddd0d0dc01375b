"""MLflow: the resolved config as parameters, metrics per step, completions with mlflow.log_table."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rlvr.config import TrackingConfig
from rlvr.errors import ConfigError
from rlvr.tracking.base import SINKS, RunIds, Sink, flat_params, run_name, table_columns

PARAMS_PER_CALL = 100  # MLflow's limit on parameters in one batch
PARAM_CHARS = 6000  # and on a parameter value's length


@SINKS.register("mlflow")
class MlflowSink(Sink):
    """MLflow: a tracking server, a database, or a local file store (default <output_dir>/mlruns)."""

    def __init__(self, tracking: TrackingConfig, config: dict[str, Any], start_step: int):
        try:
            import mlflow
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise ConfigError("tracking.report_to lists mlflow but it is not installed: pip install 'rlvr[mlflow]'.") \
                from None
        m = tracking.mlflow
        uri = m.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or \
            (Path(tracking.output_dir).resolve() / "mlruns").as_uri()
        if uri.startswith("file:"):
            # MLflow 3 keeps the file store in maintenance mode behind this switch; the user chose a file store.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.mlflow = mlflow
        self.client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        ids = RunIds(tracking.output_dir)
        previous = ids.get("mlflow") if start_step else None
        if previous:
            self.run_id = previous
            self.client.update_run(previous, status="RUNNING")
        else:
            name = m.experiment or tracking.project
            experiment = self.client.get_experiment_by_name(name)
            experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
            tags = {"mlflow.runName": run_name(tracking), **{tag: "" for tag in tracking.tags}}
            self.run_id = self.client.create_run(experiment_id, tags=tags).info.run_id
            params = [mlflow.entities.Param(k, str(v)[:PARAM_CHARS]) for k, v in flat_params(config).items()]
            for i in range(0, len(params), PARAMS_PER_CALL):
                self.client.log_batch(self.run_id, params=params[i : i + PARAMS_PER_CALL])
            ids.set("mlflow", self.run_id)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        from mlflow.entities import Metric
        from mlflow.utils.time import get_current_time_millis

        now = get_current_time_millis()
        rows = [Metric(_metric_key(k), float(v), now, step) for k, v in metrics.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)]
        for i in range(0, len(rows), 1000):
            self.client.log_batch(self.run_id, metrics=rows[i : i + 1000])

    def log_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        columns = table_columns(rows)
        self.client.log_table(self.run_id, {c: [row.get(c) for row in rows] for c in columns},
                              artifact_file=f"completions/step_{step:06d}.json")

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def _metric_key(name: str) -> str:
    """MLflow keys allow letters, digits, '_', '-', '.', ' ', ':' and '/'; others (as in 'pass@4') become '_'."""
    return "".join(c if c.isalnum() or c in "_-. :/" else "_" for c in name)
