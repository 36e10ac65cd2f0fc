"""``nmt compare --launcher slurm`` against a real SLURM cluster (scripts/slurm-cluster.sh
starts one on this machine; .ci/run does, and forbids skipping here): the study's
report equals a local one, a job requeued mid-run resumes to the parameters of an
uninterrupted run, and a failing variant is reported with its job while the rest
finish."""

from __future__ import annotations

import json
import pickle
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.errors import NmtError
from nmt.launch.slurm import read_outcome
from nmt.progress import flag
from nmt.setup.recipe import load_recipe
from nmt.training.run import train
from tests.compare.test_compare import write_spec
from tests.conftest import require_extra, subprocess_env

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slurm() -> None:
    """A SLURM cluster that answers, or a skip with the reason (a failure in CI)."""
    require_extra("submitit", "slurm")
    check = subprocess.run(["bash", str(ROOT / "scripts/slurm-cluster.sh"), "check"])
    if check.returncode != 0:
        message = "no SLURM cluster answers here (scripts/slurm-cluster.sh starts one, as root)"
        if flag("NMT_REQUIRE_SLURM"):
            pytest.fail(message + " (NMT_REQUIRE_SLURM=1 forbids skipping)")
        pytest.skip(message)


def slurm_spec(tmp_path: Path, toy_dir: Path, variants: dict, seeds=(1, 2), **train) -> Path:
    spec = write_spec(tmp_path, toy_dir, variants, seeds)
    data = yaml.safe_load(spec.read_text())
    data["launcher"] = {"kind": "slurm", "cpus": 1, "time": 10}
    data["set"] += [f"train.{k}={v}" for k, v in train.items()]
    spec.write_text(yaml.safe_dump(data))
    return spec


def local_twin(spec: Path, out: Path) -> Path:
    """The same study, trained here one run at a time on one thread each."""
    data = yaml.safe_load(spec.read_text())
    data["out_dir"] = str(out)
    data["launcher"]["kind"] = "local"
    twin = spec.with_name("local.yaml")
    twin.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["compare", str(twin), "--device", "cpu", "--jobs", "2"])
    assert result.exit_code == 0, result.output
    return out


def weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "last.pt", weights_only=True)["model"]


def trained_alone(run: Path, out: Path) -> Path:
    """The run's own resolved recipe, trained without interruption on one thread (as
    a study's worker trains it), in this process (one of its own would add only its
    seconds of imports): its run directory."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(load_recipe(run / "recipe.yaml", [f"run_dir={out}"]), device="cpu")
    finally:
        torch.set_num_threads(threads)
    return out


def test_a_study_through_slurm_reports_as_a_local_one(slurm, tmp_path, toy_dir):
    """Every job trains, tests and decodes its run the spec's other ways (the study
    process decodes nothing), and the report is the local one's."""
    variants = {"global": [], "local_m": ["model.attention.kind=local_m"]}
    spec = slurm_spec(tmp_path, toy_dir, variants, seeds=(1,))
    data = yaml.safe_load(spec.read_text())
    data["decodings"] = {"greedy": ["decode.beam=1"]}
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert "submitted 2 of 2 runs as SLURM job array" in result.output
    assert "as greedy" not in result.output  # the jobs decoded: nothing left here
    # no terminal here: the wait is plain lines, one per change with the runs ended a
    # minute and an ETA, and no bar's last render
    done = re.search(
        r"study: 0 queued, 0 running, 2 done, 0 failed, ([\d.]+) runs/min, "
        r"elapsed \d:\d\d:\d\d, ETA (\d:\d\d:\d\d|\?)",
        result.output,
    )
    assert done and float(done[1]) > 0, result.output
    assert not [line for line in result.output.splitlines() if line.startswith("study ")]
    out = tmp_path / "study"
    local = local_twin(spec, tmp_path / "local")
    ours, theirs = (json.loads((d / "results.json").read_text())["rows"] for d in (out, local))
    assert {r["variant"] for r in ours} == {"global", "local_m", "global@greedy", "local_m@greedy"}
    keys = ("variant", "split", "bleu", "chrf", "bleu_ci_low", "p_value", "length_ratio")
    assert [{k: r[k] for k in keys} for r in ours] == [{k: r[k] for k in keys} for r in theirs]
    for variant in variants:
        a, b = weights(out / f"runs/{variant}/seed1"), weights(local / f"runs/{variant}/seed1")
        assert all(torch.equal(a[k], b[k]) for k in a)
    # collected again: every run is reused, nothing is submitted
    again = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert again.exit_code == 0 and "submitted" not in again.output
    # a decoding added to the finished study: jobs decode it, not the study process
    data["decodings"]["beam2"] = ["decode.beam=2"]
    spec.write_text(yaml.safe_dump(data))
    more = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert more.exit_code == 0, more.output
    assert "submitted 2 of 2 runs as SLURM job array" in more.output
    assert "as beam2" not in more.output
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert {"global@beam2", "local_m@beam2"} <= {r["variant"] for r in rows}


def test_a_job_warned_of_its_time_limit_requeues_itself_and_resumes_exactly(
    slurm, tmp_path, toy_dir
):
    """Mid-run, the job gets the SIGUSR2 that SLURM sends before the time limit
    (``scancel --signal=USR2``): it has SLURM requeue it (``scontrol requeue``, what
    pre-emption does too), the SIGTERM that follows saves last.pt at the current
    update, the requeued job resumes, and the run ends with the parameters of an
    uninterrupted one, every update logged once."""
    # 200 tiny updates: the signal, sent at update 15, must land before the last (at
    # 60 a loaded machine's job once finished training first and was requeued in its
    # evaluation, which resumes nothing)
    spec = slurm_spec(
        tmp_path, toy_dir, {"global": []}, seeds=(1,), max_steps=200, log_every=1, valid_every=100
    )
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu", "--no-wait"])
    assert result.exit_code == 0, result.output
    out, run = tmp_path / "study", tmp_path / "study/runs/global/seed1"
    (job,) = json.loads((out / "slurm/jobs.json").read_text()).values()
    log = run / "metrics.jsonl"
    deadline = time.monotonic() + 180
    while not (log.is_file() and '"step": 15' in log.read_text()):
        assert time.monotonic() < deadline, "the job did not reach step 15 in 180 s"
        time.sleep(0.05)
    subprocess.run(["scancel", "--signal=USR2", job], check=True)
    # SLURM holds a requeued job for about two minutes; a test need not wait for that
    while "PENDING" not in squeue_state(job):
        assert time.monotonic() < deadline, "the job was not requeued"
        time.sleep(0.5)
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)
    done = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert done.exit_code == 0, done.output
    steps = [json.loads(x)["step"] for x in log.read_text().splitlines() if '"loss"' in x]
    assert steps == list(range(1, 201))  # every update once: none lost, none twice
    log_err = out / "slurm" / job.split("_")[0] / f"{job}_0_log.err"
    assert "CANCELLED" in log_err.read_text() and "resumed at step" in log_err.read_text()
    a, b = weights(run), weights(trained_alone(run, tmp_path / "alone"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def squeue_state(job: str) -> str:
    return subprocess.run(
        ["squeue", "--array", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True
    ).stdout


def test_a_failing_variant_is_reported_with_its_job_and_the_rest_finish(slurm, tmp_path, toy_dir):
    damaged = tmp_path / "damaged"
    shutil.copytree(toy_dir, damaged)
    lines = (toy_dir / "train.src").read_bytes().split(b"\n")
    (damaged / "train.src").write_bytes(b"\n".join([b"caf\xe9", *lines[1:]]))
    variants = {"global": [], "broken": [f"data.dir={damaged}"]}
    spec = slurm_spec(tmp_path, toy_dir, variants, seeds=(1,))
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 2, result.output
    results = json.loads((tmp_path / "study/results.json").read_text())
    assert [r["variant"] for r in results["rows"]] == ["global"]
    (failure,) = results["failed"]
    assert failure["error"].startswith("SLURM job ") and "not UTF-8" in failure["error"]
    assert "error: 1 of 2 runs failed (broken seed 1: SLURM job" in " ".join(result.output.split())


def test_a_job_queued_before_jobs_decoded_their_runs_still_runs(tmp_path, toy_dir):
    """A job pickled by an nmt whose jobs did not decode (no ``decodings`` in its
    state) unpickles with none, so that the study decodes its run when it collects it."""
    from nmt.launch.slurm import RunJob
    from nmt.setup.compare import load_spec

    _, (run,) = load_spec(write_spec(tmp_path, toy_dir, {"global": []}, (1,)))
    job = RunJob(run, ("test",), "cpu", tmp_path, (("greedy", ("decode.beam=1",)),))
    del job.decodings  # the state an older nmt pickled
    assert pickle.loads(pickle.dumps(job)).decodings == ()


def test_a_job_holds_plain_data_that_a_fresh_process_unpickles_before_any_plugin(tmp_path, toy_dir):
    """A job is unpickled by a fresh interpreter before anything else: a run whose
    attention kind comes from a plug-in file must not need the plug-in to unpickle,
    and builds its config once the plug-in is imported."""
    submitit = require_extra("submitit", "slurm")
    from nmt.launch.slurm import RunJob
    from nmt.setup.compare import load_spec

    plugin = ROOT / "tests/plugins/uniform_attention.py"
    variants = {"global": [], "uniform": ["model.attention.kind=uniform"]}
    _, (_, run) = load_spec(write_spec(tmp_path, toy_dir, variants, (1,)), plugins=(str(plugin),))
    path = tmp_path / "job.pkl"
    submitit.core.utils.cloudpickle_dump(RunJob(run, ("test",), "cpu", tmp_path), path)
    check = (
        "import cloudpickle, sys; job = cloudpickle.load(open(sys.argv[1], 'rb'));"
        "from nmt.setup.config import from_dict; from nmt.setup.plugins import with_plugins;"
        "from nmt.setup.recipe import RunConfig;"
        "print(from_dict(RunConfig, with_plugins(job.recipe)).model.attention.kind)"
    )
    done = subprocess.run(
        [sys.executable, "-c", check, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_env(),  # this checkout importable from any directory
        cwd=tmp_path,  # not the suite's working directory: a job starts elsewhere
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "uniform"


@pytest.mark.parametrize(
    ("launcher", "key", "reason"),
    [
        ({"partition": "nope"}, "launcher.partition", "invalid partition specified: nope"),
        ({"mem_gb": 100000}, "launcher.mem_gb", "Memory specification can not be satisfied"),
        ({"gpus": 2}, "launcher.gpus", "Invalid generic resource"),
        ({"sbatch": {"nosuchopt": "x"}}, "launcher.sbatch", "unrecognized option"),
    ],
)
def test_an_sbatch_refusal_is_one_line_with_the_key_and_leaves_nothing(
    slurm, tmp_path, toy_dir, launcher, key, reason
):
    spec = slurm_spec(tmp_path, toy_dir, {"global": []}, seeds=(1,))
    data = yaml.safe_load(spec.read_text())
    data["launcher"].update(launcher)
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {key}: SLURM refused"), lines
    assert reason in lines[0]
    left = sorted(p.name for p in (tmp_path / "study" / "slurm").rglob("*"))
    assert left == [], left  # no stray pickle or submission script


def test_a_job_that_can_never_start_is_cancelled_and_named(slurm, tmp_path, toy_dir):
    spec = slurm_spec(tmp_path, toy_dir, {"global": []}, seeds=(1,))
    data = yaml.safe_load(spec.read_text())
    data["launcher"]["cpus"] = 4096  # more than any node of the cluster
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 2, result.output
    assert "error: launcher.cpus: SLURM job" in result.output
    assert "can never start (PartitionConfig" in " ".join(result.output.split())
    ours = json.loads((tmp_path / "study/slurm/jobs.json").read_text()).values()
    queued = subprocess.run(["squeue", "--noheader", "--format=%i"], capture_output=True, text=True)
    assert not set(ours) & {j.strip() for j in queued.stdout.split()}


def test_the_study_reads_only_what_its_jobs_wrote_in_json(slurm, tmp_path, toy_dir):
    """A job's outcome is its JSON file; a pickle put in place of submitit's result is
    never loaded (it would run code), and a damaged JSON file is a failure saying so."""
    spec = slurm_spec(tmp_path, toy_dir, {"global": []}, seeds=(1,))
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "study" / "slurm"
    (outcome,) = (folder / "results").glob("*.json")
    assert json.loads(outcome.read_text())["status"] == "trained"
    marker = tmp_path / "ran"
    pickles = list(folder.rglob("*_result.pkl"))
    assert pickles
    for pickled in pickles:  # a replaced result: a pickle that runs code when loaded
        pickled.write_bytes(b"cos\nsystem\n(V" + f"touch {marker}".encode() + b"\ntR.")
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert not marker.exists()
    job = outcome.stem
    outcome.write_text("{not json")
    assert read_outcome(folder, job)[0] == "failed" and "damaged" in read_outcome(folder, job)[1]
    outcome.write_text(json.dumps({"status": "rm -rf", "error": None}))
    assert "not a job outcome" in read_outcome(folder, job)[1]


def test_no_wait_without_slurm_and_a_jobs_file_that_is_a_directory_are_refused_first(
    slurm, tmp_path, toy_dir
):
    spec = slurm_spec(tmp_path, toy_dir, {"global": []}, seeds=(1,))
    local = yaml.safe_load(spec.read_text())
    local["launcher"]["kind"] = "local"
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(local))
    result = runner.invoke(app, ["compare", str(tmp_path / "local.yaml"), "--no-wait"])
    assert result.exit_code == 2
    assert "--no-wait: the local launcher trains the runs here" in result.output
    (tmp_path / "study" / "slurm" / "jobs.json").mkdir(parents=True)
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 2 and "jobs.json: not a file" in result.output
    assert not list((tmp_path / "study" / "slurm").glob("*.pkl"))


def test_absurd_launcher_values_are_refused_before_submitting(tmp_path, toy_dir):
    for launcher, key in (
        ({"mem_gb": 0.0001}, "launcher.mem_gb"),
        ({"sbatch": {"comment": "a\nb"}}, "launcher.sbatch.comment"),
    ):
        spec = slurm_spec(tmp_path, toy_dir, {"global": []}, seeds=(1,))
        data = yaml.safe_load(spec.read_text())
        data["launcher"].update(launcher)
        spec.write_text(yaml.safe_dump(data))
        result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
        assert result.exit_code == 2 and key in result.output, result.output


def test_jobs_the_study_cannot_record_are_cancelled_and_said_in_one_line(
    slurm, tmp_path, toy_dir, monkeypatch
):
    """A full disk after sbatch accepted the array: jobs.json cannot be written, so a
    second run of the study would not find the jobs and would submit them again; they
    are cancelled, and the error says so."""
    import nmt.launch.slurm as launcher

    spec = slurm_spec(tmp_path, toy_dir, {"global": []}, seeds=(1,))
    real = launcher.write_text

    def full(path, text):
        if path.name == "jobs.json":
            raise NmtError(f"{path}: cannot write (No space left on device)")
        real(path, text)

    original, submitted = launcher.submit, []

    def recording(*args):
        jobs = original(*args)
        submitted.extend(j.job_id for j in jobs)
        return jobs

    monkeypatch.setattr(launcher, "write_text", full)
    monkeypatch.setattr(launcher, "submit", recording)
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu", "--no-wait"])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert lines[-1].endswith("the 1 job(s) just submitted were cancelled"), lines
    assert len(submitted) == 1
    for _ in range(50):  # cancelled: gone from the queue within seconds
        queue = ["squeue", "--noheader", "--format=%i", "--states=PENDING,RUNNING"]
        queued = subprocess.run(queue, capture_output=True, text=True).stdout.split()
        if not set(submitted) & set(queued):
            return
        time.sleep(0.2)
    pytest.fail(f"jobs {submitted} still queued")
