from __future__ import annotations

import json
import shutil
import time

import pytest
import torch
from torch._dynamo.utils import counters

from nmt.errors import NmtError
from nmt.io import checkpoint
from nmt.training.build import build
from nmt.training.lr_schedule import inverse_sqrt
from nmt.training.optimizers import Optimizers
from nmt.training.run import prepare, train
from nmt.training.trainer import Trainer
from tests.helpers import DiesAfterUpdate, Heard, Killed


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_run_writes_checkpoints_and_metrics(tiny_config, capsys):
    cfg = tiny_config()
    summary = train(cfg, device="cpu")
    run = cfg.run_dir
    assert summary["steps"] == 6 and summary["stop"] == "train.max_steps"
    assert "stopped at update" not in capsys.readouterr().err  # it reached its max_steps
    for name in ("best.pt", "last.pt", "recipe.yaml", "spm.model", "metrics.jsonl"):
        assert torch.os.path.exists(f"{run}/{name}"), name
    records = [json.loads(line) for line in open(f"{run}/metrics.jsonl")]
    valid = [r for r in records if "valid_loss" in r]
    assert [r["step"] for r in valid] == [3, 6] and all("valid_bleu" in r for r in valid)
    training = [r for r in records if "tokens_per_s" in r]
    assert training and all(r["expected_steps"] == 6 for r in training)  # the study's bar
    best = checkpoint.load(f"{run}/best.pt")
    assert "optimizer" not in best and best["config"]["run_dir"] == run


def test_a_time_budget_that_ends_a_run_early_is_named(tiny_config, capsys):
    """train.max_minutes spent before train.max_steps: the summary and a line on
    stderr (the terminal, or the log of a study's run) name the key."""
    cfg = tiny_config(train={"max_steps": 10_000, "max_minutes": 0.001, "valid_every": 10_000})
    summary = train(cfg, device="cpu")
    assert summary["steps"] < 10_000 and summary["stop"] == "train.max_minutes"
    err = capsys.readouterr().err
    assert f"stopped at update {summary['steps']:,} of train.max_steps 10,000: " in err
    assert "train.max_minutes (0.001) is spent" in err


@pytest.mark.parametrize("early_stopping", ["bleu", "loss"])
def test_best_pt_holds_the_best_validation_not_the_last(tiny_config, monkeypatch, early_stopping):
    """Dev scores that get worse after the first validation: best.pt keeps the weights
    of that validation (it had been saved at every validation since the resume of an
    interrupted validation was made exact)."""

    scores = iter(
        [{"valid_loss": 1.0, "valid_bleu": 30.0}, {"valid_loss": 2.0, "valid_bleu": 20.0}]
    )
    monkeypatch.setattr(Trainer, "validate", lambda self, progress=None: next(scores))
    cfg = tiny_config(
        train={"early_stopping": early_stopping, "valid_bleu": early_stopping == "bleu"}
    )
    summary = train(cfg, device="cpu")
    best, last = (checkpoint.load(f"{cfg.run_dir}/{n}.pt") for n in ("best", "last"))
    assert summary["best_step"] == best["state"]["step"] == 3 and last["state"]["step"] == 6
    assert any(not torch.equal(best["model"][k], last["model"][k]) for k in best["model"])


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_logged_rates_leave_out_the_time_validation_takes(tiny_config, monkeypatch):
    """Each log line's tokens/s is over its interval's training steps: a validation
    that takes a second between two steps of one interval must not lower it."""

    validate = Trainer._interruptible_validate

    def slow(self, bar):
        time.sleep(1.0)
        return validate(self, bar)

    monkeypatch.setattr(Trainer, "_interruptible_validate", slow)
    cfg = tiny_config(train={"max_steps": 8, "log_every": 2, "valid_every": 3})
    train(cfg, device="cpu")
    records = [json.loads(line) for line in open(f"{cfg.run_dir}/metrics.jsonl")]
    rates = [r["tokens_per_s"] for r in records if "tokens_per_s" in r]
    assert len(rates) == 4, rates
    # Validations follow steps 3 and 6, inside the intervals 3-4 and 7-8 (a log line
    # ends 5-6 first). Over wall time those two rates lost a second: hundreds of
    # tokens/s, where 5-6 had thousands. The first interval warms up; it is left out.
    assert max(rates[1:]) < 5 * min(rates[1:]), rates


@pytest.mark.parametrize(
    "sampling", [None, pytest.param({"alpha": 0.2, "nbest_size": -1}, marks=pytest.mark.slow)]
)
def test_resume_equals_uninterrupted(tiny_config, tmp_path, sampling):
    """Also under subword sampling, resumed mid-epoch after an epoch of its own."""
    data = {"vocab": {"size": 200, "sampling": sampling}}
    steps = {"max_steps": 6} if sampling is None else {"max_steps": 10, "batch_tokens": 4096}
    full = tiny_config(train=steps, data=data)
    train(full, device="cpu")
    part = tiny_config(train={**steps, "max_steps": steps["max_steps"] // 2 + 1}, data=data)
    part = type(part)(**{**part.__dict__, "run_dir": str(tmp_path / "resumed")})
    train(part, device="cpu")
    rest = type(full)(**{**full.__dict__, "run_dir": part.run_dir})
    train(rest, device="cpu", resume=True)
    if sampling is not None:  # the interruption fell in an epoch after the first
        records = [json.loads(x) for x in open(f"{part.run_dir}/metrics.jsonl")]
        stop = part.train.max_steps
        assert max(r["epoch"] for r in records if r["step"] <= stop) >= 2, records
    a = checkpoint.load(f"{full.run_dir}/last.pt")["model"]
    b = checkpoint.load(f"{rest.run_dir}/last.pt")["model"]
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_save_every_keeps_last_pt_between_validations_so_a_killed_run_resumes(
    tiny_config, tmp_path
):
    """``train.save_every``: a run validated only at its end that dies outright after
    update 5 has last.pt from update 4, and resumed from it ends with the parameters of
    a run never killed."""
    steps = {"max_steps": 8, "valid_every": 8, "save_every": 2}
    whole = tiny_config(train=steps)
    train(whole, device="cpu")
    killed = type(whole)(**{**whole.__dict__, "run_dir": str(tmp_path / "killed")})
    dying = DiesAfterUpdate(*build(killed, print))
    dying.stop_at = 5
    with pytest.raises(Killed):
        dying.run()
    assert checkpoint.load(tmp_path / "killed" / "last.pt")["state"]["step"] == 4
    train(killed, device="cpu", resume=True)
    a = checkpoint.load(f"{whole.run_dir}/last.pt")["model"]
    b = checkpoint.load(f"{killed.run_dir}/last.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_refuses_to_overwrite_or_resume_nothing(tiny_config):
    cfg = tiny_config(train={"max_steps": 1, "valid_every": 1})
    with pytest.raises(NmtError, match="nothing to resume"):
        train(cfg, device="cpu", resume=True)
    train(cfg, device="cpu")
    with pytest.raises(NmtError, match="already holds a run"):
        train(cfg, device="cpu")


def test_gradient_accumulation_matches_one_big_batch(tiny_config):
    cfg = tiny_config(model={"dropout": 0.0})
    a = prepare(cfg, "cpu")
    torch.manual_seed(0)
    b = prepare(cfg, "cpu")
    b.model.load_state_dict(a.model.state_dict())
    # SGD: Adam's first step is ~lr·sign(g), which amplifies float noise in the
    # (theoretically zero) gradients of key biases.
    for t in (a, b):
        t.optimizer = Optimizers([torch.optim.SGD(t.model.parameters(), lr=1.0)])
    plan = a.data.train.epoch_batches(512, 0, 0)[:2]
    a.train_step([a.data.train.collate([*plan[0], *plan[1]])])
    b.train_step([b.data.train.collate(p) for p in plan])
    for (name, p), q in zip(a.model.named_parameters(), b.model.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5, msg=name)


@pytest.mark.parametrize("clip", [0.5, 0.0], ids=["clipped", "clip_norm 0: not clipped"])
def test_an_update_clips_the_gradient_and_takes_the_schedules_rate(tiny_config, clip):
    """train_step: the gradient of the summed smoothed loss over the update's target
    tokens, clipped to train.clip_norm, applied at inverse_sqrt(step + 1) (update
    s + 1 follows s done); it reports the smoothed cross-entropy per target token."""
    cfg = tiny_config(model={"dropout": 0.0}, train={"clip_norm": clip, "lr": 1.0, "warmup": 4})
    trainer = prepare(cfg, "cpu")
    trainer.optimizer = Optimizers([torch.optim.SGD(trainer.model.parameters(), lr=1.0)])  # peak
    trainer.state.step = 2
    batch = trainer.data.train.collate(trainer.data.train.epoch_batches(512, 0, 0)[0])
    loss, token_loss, _ = trainer.loss(batch)
    (loss / batch.tgt_tokens).backward()
    params = [p for p in trainer.model.parameters() if p.grad is not None]
    grads = [p.grad.clone() for p in params]
    norm = float(torch.cat([g.flatten() for g in grads]).norm())
    assert norm > 0.5  # so the clip binds
    scale = clip / norm if clip else 1.0
    before = [p.detach().clone() for p in params]
    trainer.optimizer.zero_grad()
    reported, logged = trainer.train_step([batch])
    lr = inverse_sqrt(3, 1.0, 4)
    assert logged["lr"] == lr == 0.75
    assert reported == pytest.approx(token_loss / batch.tgt_tokens, rel=1e-6)
    for p, p0, g in zip(params, before, grads):
        torch.testing.assert_close(p.detach(), p0 - lr * scale * g, atol=1e-6, rtol=1e-4)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="torch.compile needs a C compiler")
def test_compiled_training_matches_eager(tiny_config):
    """``train.compile`` changes the speed, not the maths: the same updates from the
    same start give the same losses and parameters (float tolerance), and the
    checkpoint keeps the eager model's parameter names. The model reads its source
    through local_p's tiled bands, whose graph before the band's width is read (its
    tiles, each query's rank in its tile) once crashed inductor's CPU code generation
    (exit 1 in nmt train for every local_p recipe): compiled, the whole pass is one
    graph (no host read of the block count breaks it). One test compiles for both:
    each compilation builds C++ kernels where inductor's cache does not hold them."""
    model = {"dropout": 0.0, "attention": {"kind": "local_p", "window": 3, "path": "windowed"}}
    eager = prepare(tiny_config(model=model), "cpu")
    compiled = prepare(tiny_config(model=model, train={"compile": True}), "cpu")
    compiled.model.load_state_dict(eager.model.state_dict())
    for t in (eager, compiled):  # SGD, for the reason given in the test above
        t.optimizer = Optimizers([torch.optim.SGD(t.model.parameters(), lr=1.0)])
    # Dynamo's own counts, not a spy in the traced code: dynamo guards on what a spy
    # mutates and compiled once per step.
    before = (counters["frames"]["ok"], counters["stats"]["unique_graphs"])
    batch = eager.data.train.epoch_batches(512, 0, 0)[0]  # one shape: one compilation
    for _ in range(3):
        a = eager.train_step([eager.data.train.collate(batch)])
        b = compiled.train_step([compiled.data.train.collate(batch)])
        assert a is not None and b is not None
        assert b[0] == pytest.approx(a[0], rel=1e-4)
    after = (counters["frames"]["ok"], counters["stats"]["unique_graphs"])
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)  # went through one graph
    for (name, p), q in zip(eager.model.named_parameters(), compiled.model.parameters()):
        torch.testing.assert_close(q, p, atol=1e-5, rtol=1e-4, msg=name)
    names = compiled.checkpoint_payload(full=False)["model"].keys()
    assert names == eager.model.state_dict().keys()


@pytest.mark.parametrize(
    "precision, dtype",
    [("auto", torch.float32), ("fp32", torch.float32), ("bf16", torch.bfloat16)],
)
def test_precision_sets_the_dtype_of_the_matmuls_only(tiny_config, precision, dtype):
    """``train.precision`` on the CPU: auto and fp32 train in fp32; bf16 autocasts the
    linear layers, while parameters and Adam's moments stay fp32 and the loss stays
    that of fp32 training to bf16's precision (8 bits of mantissa)."""
    reference, trainer = (
        prepare(tiny_config(model={"dropout": 0.0}, train={"precision": p}), "cpu")
        for p in ("fp32", precision)
    )
    trainer.model.load_state_dict(reference.model.state_dict())
    seen: list[torch.dtype] = []
    for module in trainer.model.modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(lambda m, args, out: seen.append(out.dtype))
    batch = trainer.data.train.epoch_batches(512, 0, 0)[0]
    expected = reference.train_step([reference.data.train.collate(batch)])
    got = trainer.train_step([trainer.data.train.collate(batch)])
    assert expected is not None and got is not None
    assert seen and set(seen) == {dtype}
    assert got[0] == pytest.approx(expected[0], rel=1e-2 if dtype == torch.bfloat16 else 1e-6)
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    moments = [s["exp_avg"] for part in trainer.optimizer.parts for s in part.state.values()]
    assert moments and {m.dtype for m in moments} == {torch.float32}


def test_reinforce_reward_is_minus_the_smoothed_training_loss(tiny_config, monkeypatch):
    """Hard attention's reward is the same per-token objective the pathwise gradient
    comes from: minus the label-smoothed cross-entropy, 0 at padding."""
    import torch.nn.functional as F

    from nmt.data.vocab import PAD
    from nmt.training import objective

    cfg = tiny_config(
        model={"dropout": 0.0, "attention": {"kind": "hard", "estimator": "reinforce"}}
    )
    trainer = prepare(cfg, "cpu")
    batch = trainer.data.train.collate(trainer.data.train.epoch_batches(512, 0, 0)[0])
    seen = []

    def attention_loss(attention, reward, mask):
        seen.append(reward)
        return None, {}

    monkeypatch.setattr(objective, "attention_loss", attention_loss)
    trainer.model.eval()  # argmax attention: the same logits in both computations
    with torch.no_grad():
        trainer.loss(batch)
        logits = trainer.model(batch.src, batch.tgt_in)  # (B,T,V)
    want = F.cross_entropy(
        logits.transpose(1, 2),
        batch.tgt_out,
        ignore_index=PAD,
        label_smoothing=0.1,
        reduction="none",
    )  # (B,T)
    torch.testing.assert_close(seen[0], -want, atol=1e-5, rtol=1e-5)


def test_local_m_measures_its_length_ratio_on_the_training_data(tiny_config):
    """The variant's ``from_data`` hook fills ``ratio``; the run's recipe.yaml keeps it."""
    import yaml

    cfg = tiny_config(model={"attention": {"kind": "local_m", "center": "length_ratio"}})
    trainer = prepare(cfg, "cpu")
    want = sum(t / s for s, t in trainer.data.train.lengths.tolist()) / len(trainer.data.train)
    assert trainer.cfg.model.attention.ratio == pytest.approx(want)
    assert trainer.model.decoder[0].cross_attn.cfg.ratio == pytest.approx(want)
    stored = yaml.safe_load((trainer.run_dir / "recipe.yaml").read_text())
    assert stored["model"]["attention"]["ratio"] == pytest.approx(want)


def test_validation_reports_every_decoded_dev_sentence(tiny_config):
    """The validation bar's listener sees each dev sentence once, and the work
    planned done."""
    trainer = prepare(tiny_config(train={"max_steps": 1}), device="cpu")
    heard = Heard()
    metrics = trainer.validate(heard)
    assert heard.plan()[0] == len(trainer.data.dev_src) and "valid_bleu" in metrics


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_resume_trims_a_damaged_metrics_log_to_its_whole_records(tiny_config):
    """A list, a step that is not a number and a cut line used to stop the resume with
    an AttributeError or TypeError."""
    cfg = tiny_config(train={"max_steps": 2, "valid_every": 2, "log_every": 1})
    train(cfg, device="cpu")
    log = f"{cfg.run_dir}/metrics.jsonl"
    whole = open(log).read()
    with open(log, "a") as f:
        f.write('[1]\n{"step": "x", "loss": 1.0}\n{"step": 3, "loss": 1.0}\n{"step": 4, "lo')
    longer = tiny_config(train={"max_steps": 4, "valid_every": 2, "log_every": 1})
    train(longer, device="cpu", resume=True)
    records = [json.loads(line) for line in open(log)]
    assert open(log).read().startswith(whole)  # the records kept are written as they were
    assert all(isinstance(r, dict) and isinstance(r["step"], int) for r in records)
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3, 4]


def test_the_plan_line_counts_pairs_over_the_token_budget(tiny_config):
    """A pair longer than train.batch_tokens trains alone in a batch over the budget:
    the line before training counts those batches, where it once said "300 batches of
    <= 1 tokens" and nothing else."""
    trainer = prepare(tiny_config(train={"batch_tokens": 12}), "cpu")
    plan = trainer.epochs.plan(trainer.state.epoch)
    sizes = trainer.epochs.pairs.lengths.max(1)  # what the budget counts
    long = int((sizes > 12).sum())  # every such pair alone, every other batch within
    alone = [b for b in plan if len(b) == 1 and sizes[b[0]] > 12]
    assert long and len(alone) == long
    line = trainer.describe()
    assert f"in {len(plan)} batches of <= 12 tokens ({long} of them a single" in line
    assert "of them" not in prepare(tiny_config(), "cpu").describe()  # 512: none over
