"""``manage.py validate``: flags as ``estimate``, exit codes, ``--wait`` running the queue inline."""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from validator.models import ValidationRun

FAKE = str(Path(__file__).with_name("fake_vllm_server.py"))
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _var(settings, tmp_path):
    settings.VAR_DIR = tmp_path


def test_without_wait_and_without_a_live_worker_it_is_refused_up_front():
    with pytest.raises(CommandError) as e:
        call_command("validate", "--model", "tiny-random/llama", "--gpu", "CPU", stdout=io.StringIO())
    assert e.value.returncode == 1 and "no validation worker is running" in str(e.value)
    assert ValidationRun.objects.count() == 0


def test_it_enqueues_and_prints_the_run(settings):
    from validator import capabilities

    capabilities.record(capabilities.describe("test-cpu-worker"))  # this machine as a live worker
    out = io.StringIO()
    call_command("validate", "--model", "tiny-random/llama", "--gpu", "CPU", "--max-model-len", "512",
                 "--max-num-seqs", "8", "--speculative-config", '{"method":"ngram","num_speculative_tokens":2}',
                 "--format", "json", stdout=out)
    printed = json.loads(out.getvalue())
    run = ValidationRun.objects.get(pk=printed["id"])
    assert printed["status"] == "queued" and printed["url"] == f"/runs/{run.pk}/"
    assert run.task_result_id  # enqueued after commit
    inp = run.configuration["engine_input"]
    assert inp["max_model_len"] == 512 and inp["max_num_seqs"] == 8
    assert run.configuration["spec_config"] == {"method": "ngram", "num_speculative_tokens": 2}


@pytest.mark.parametrize("argv,flag", [
    (["--model", "nobody/nothing"], "--model"),
    (["--model", "tiny-random/llama", "--speculative-config", "{bad"], "--speculative-config"),
    (["--model", "tiny-random/llama", "--vllm-version", "0.6.4"], "--vllm-version"),
    (["--model", "tiny-random/llama", "--wait", "--inline-after", "-1"], "--inline-after"),
    (["--model", "tiny-random/llama", "--wait", "--inline-after", "nan"], "--inline-after"),
])
def test_bad_input_exits_2_with_the_flag(argv, flag):
    with pytest.raises(CommandError) as e:
        call_command("validate", *argv)
    assert e.value.returncode == 2 and flag in str(e.value)
    assert ValidationRun.objects.count() == 0


def test_wait_runs_it_inline_and_prints_the_report(settings):
    settings.VALIDATOR_SERVER_COMMAND = [sys.executable, FAKE, "--fake-mode", "refuse", "--no-such-flag"]
    out = io.StringIO()
    with pytest.raises(CommandError) as e:
        call_command("validate", "--model", "tiny-random/llama", "--wait", "--inline-after", "0",
                     "--format", "json", stdout=out, stderr=io.StringIO())
    assert e.value.returncode == 1 and "failed" in str(e.value)
    report = json.loads(out.getvalue())
    assert report["status"] == "failed" and "unrecognized arguments: --no-such-flag" in report["error"]
    assert ValidationRun.objects.get().status == "failed"
