import io
import json
import logging

import structlog

from kernelopt.log import configure, get_logger


def test_temporal_log_records_carry_campaign_and_target_ids() -> None:
    stream = io.StringIO()
    configure(json=True, level="info", stream=stream)
    logging.getLogger("temporalio.activity").info(
        "gate ran",
        extra={
            "temporal_activity": {
                "workflow_id": "conv-1a2b/search/triton_poi_fused_relu_0",
                "activity_type": "gate_candidate",
                "attempt": 2,
            }
        },
    )
    line = json.loads(stream.getvalue().strip().splitlines()[-1])
    assert line["campaign_id"] == "conv-1a2b"
    assert line["target_id"] == "triton_poi_fused_relu_0"
    assert line["activity_type"] == "gate_candidate" and line["attempt"] == 2


def test_bound_ids_appear_on_structlog_lines() -> None:
    stream = io.StringIO()
    configure(json=True, level="info", stream=stream)
    with structlog.contextvars.bound_contextvars(candidate_id="t0-c3"):
        get_logger("x").info("decided", accepted=False)
    line = json.loads(stream.getvalue().strip().splitlines()[-1])
    assert line["candidate_id"] == "t0-c3" and line["event"] == "decided"
