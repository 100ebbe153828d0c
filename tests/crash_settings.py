"""Settings for tests that run the worker as a real process (``db_worker``, the sweep command): the
project's settings plus the fake vLLM server and benchmark commands, given as JSON argv lists in
``TEST_VALIDATOR_SERVER_COMMAND`` / ``TEST_VALIDATOR_BENCH_COMMAND``."""
import json
import os

from llmcalc.settings import *  # noqa: F403

VALIDATOR_SERVER_COMMAND = json.loads(os.environ["TEST_VALIDATOR_SERVER_COMMAND"])
VALIDATOR_BENCH_COMMAND = json.loads(os.environ["TEST_VALIDATOR_BENCH_COMMAND"])
VALIDATOR_HEARTBEAT_S = 0.5
VALIDATOR_STOP_GRACE_S = 1
VALIDATOR_KEEP_WORKDIR = False
