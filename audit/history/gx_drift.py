"""Great Expectations gives the drift verdicts: tonight's judged series as one small pandas table (id, value), one
ExpectColumnValuesToBeBetween per series (row_condition `id == i`) whose min_value / max_value are suite
parameters (`{"$PARAMETER": "low_i"}`), and the parameters computed from the history by drift.bounds, handed to
the validation run as expectation_parameters. An ephemeral GX context: nothing is written, no Spark needed."""
from __future__ import annotations

import logging
import os
from typing import Sequence

from audit.history.drift import Bound

log = logging.getLogger("replaudit.history")
SUITE = "replaudit_drift"


class DriftValidationError(RuntimeError):
    """GX could not evaluate an expectation: the drift verdicts are unknown."""


def violated(bounds: Sequence[Bound]) -> list[Bound]:
    """The bounds GX finds broken (in the order given)."""
    judged = [(i, b) for i, b in enumerate(bounds) if b.low is not None or b.high is not None]
    if not judged:
        return []
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    import pandas as pd

    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx = gx.get_context(mode="ephemeral")
    ctx.enable_analytics(False)
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)    # task logs, not terminals
    batch = ctx.data_sources.add_pandas(SUITE).add_dataframe_asset("tonight").add_batch_definition_whole_dataframe(
        "all")
    suite = ctx.suites.add(gx.ExpectationSuite(SUITE))
    parameters = {}
    for i, b in judged:
        kwargs = {}
        for side, value in (("min_value", b.low), ("max_value", b.high)):
            if value is not None:
                parameters[f"{side}_{i}"] = float(value)
                kwargs[side] = {"$PARAMETER": f"{side}_{i}"}
        suite.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(
            column="value", row_condition=f"id=={i}", condition_parser="pandas", meta={"bound": i}, **kwargs))
    definition = ctx.validation_definitions.add(gx.ValidationDefinition(name=SUITE, data=batch, suite=suite))
    frame = pd.DataFrame({"id": [i for i, _ in judged], "value": [float(b.after) for _, b in judged]})
    result = definition.run(batch_parameters={"dataframe": frame}, expectation_parameters=parameters)
    broken = set()
    for r in result.results:
        i = r.expectation_config.meta["bound"]
        if r.exception_info and r.exception_info.get("raised_exception"):
            raise DriftValidationError(f"GX could not evaluate the drift of {bounds[i].metric}{{{bounds[i].labels}}}: "
                                       f"{r.exception_info.get('exception_message')}")
        if not r.success:
            broken.add(i)
    return [b for i, b in enumerate(bounds) if i in broken]
