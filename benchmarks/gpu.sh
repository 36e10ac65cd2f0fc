#!/usr/bin/env bash
# The GPU checks and figures, for a machine with one CUDA device (the CPU-only
# project never needs this). Results go to $OUT (default gpu-out/).
#
#   benchmarks/gpu.sh speed    DATA_DIR   # at most BUDGET seconds (default 470): nmt's
#                                         # step against plain PyTorch (vs_reference.py)
#                                         # at the shipped shape and Transformer-base,
#                                         # eager, then compiled from empty caches; time
#                                         # to 40 test BLEU, seeds 1-3 one after another;
#                                         # the CUDA tests; the profiles as Chrome traces
#                                         # in $OUT/speed-traces.tar.gz. A part starts
#                                         # only if its usual time fits what is left.
#   benchmarks/gpu.sh checks   DATA_DIR   # CUDA tests, throughput (bf16, +compile),
#                                         # attention scaling, DDP over NCCL (>= 2 GPUs)
#   benchmarks/gpu.sh converge DATA_DIR   # reference recipes for MINUTES (default 7):
#                                         # de-en, en-de, de-en with scheduled sampling,
#                                         # de-en with 4x the batch
#   benchmarks/gpu.sh ttq      DATA_DIR   # time to quality (docs/benchmarks.md): each
#                                         # setting of SETTINGS alone on the GPU, scored
#                                         # on SPLIT (default val: tune; then
#                                         # SPLIT=test_2016_flickr with the chosen one;
#                                         # ALSO=test_2016_flickr scores the same
#                                         # snapshots on a second split, to report)
#   benchmarks/gpu.sh study    DATA_DIR   # the Multi30k studies of docs/results.md, all
#                                         # runs sharing the GPU through MPS; idempotent:
#                                         # each call starts what is not yet running,
#                                         # waits WAIT seconds (default 540), reports and
#                                         # packs the reports; SPECS names the specs
#                                         # (SPECS=compare-docsub-zh-en: the Wikipedia
#                                         # zh-en study, three seeds; its corpus first
#                                         # made here by scripts/docsub-zh-en.sh into
#                                         # data/docsub-zh-en and carried along)
#
# DATA_DIR holds Multi30k (train/val/test_2016_flickr .de/.en, gzipped or not).
set -uo pipefail
usage="usage: benchmarks/gpu.sh speed|checks|converge|ttq|study DATA_DIR"
mode=${1:?$usage}
data=$(realpath "${2:?$usage}")
out=${OUT:-gpu-out}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
step() { echo; echo "=== $*"; }

speed() {
    local deadline=$((SECONDS + ${BUDGET:-470}))
    # fits SECONDS PART: whether PART's usual time is left before the deadline
    fits() {
        ((SECONDS + $1 <= deadline)) && return
        echo "skipped $2: it takes about $1 s and $((deadline > SECONDS ? deadline - SECONDS : 0)) s are left"
        return 1
    }
    # cap SECONDS: a part's limit, twice its usual time but not past the deadline
    cap() { echo $((2 * $1 < deadline - SECONDS ? 2 * $1 : deadline - SECONDS)); }
    step "device"
    nvidia-smi -L
    $py -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
    local -A shapes=(
        [shipped]="--set train.batch_tokens=8192"
        [base]="--set model.d_model=512 --set model.ffn=2048 --set model.heads=8
            --set model.encoder_layers=6 --set model.decoder_layers=6
            --set train.batch_tokens=16384 --set train.optimizer=adam"
    )
    mkdir -p "$out/traces"
    for compiled in "" "--compile"; do
        for shape in shipped base; do
            local name=$shape${compiled:+-compiled} need=45
            [[ -n $compiled ]] && need=120
            fits $need "vs_reference $name" || continue
            step "nmt against plain PyTorch: $name (bf16 autocast)"
            start=$SECONDS
            # shellcheck disable=SC2086  # the shape is a list of options
            TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) \
                timeout "$(cap $need)" $py benchmarks/vs_reference.py --device cuda \
                --data "$data" --steps 30 --warmup-steps 10 --rows 12 --profile-steps 3 $compiled \
                ${shapes[$shape]} --trace "$out/traces/$name.json" 2>&1 | grep -v Warning
            echo "wall time, setup and compiling included: $((SECONDS - start)) s"
        done
    done
    tar czf "$out/speed-traces.tar.gz" -C "$out" traces && rm -r "$out/traces"
    # the setting of docs/benchmarks.md's GPU rows of time to 40 BLEU
    local sets=(--set train.optimizer=muon --set train.batch_tokens=8192
        --set train.max_steps=1200 --set train.warmup=120 --set train.lr=3e-3
        --set train.max_minutes=2)
    for seed in 1 2 3; do
        fits 100 "time to quality, seed $seed" || continue
        step "time to 40 test BLEU, seed $seed (from the command's start)"
        rm -rf "/tmp/nmt-ttq-seed$seed"
        timeout "$(cap 100)" $py benchmarks/time_to_quality.py \
            recipes/multi30k-de-en.yaml --device cuda --data "$data" \
            --split test_2016_flickr --every 200 --run-dir "/tmp/nmt-ttq-seed$seed" \
            "${sets[@]}" --set "train.seed=$seed" 2>&1 | grep -v Warning | tail -n 12
        cp "/tmp/nmt-ttq-seed$seed/time_to_quality-test_2016_flickr.json" \
            "$out/ttq-seed$seed-test_2016_flickr.json" 2>/dev/null
    done
    fits 60 "the CUDA tests" || return 0
    step "CUDA tests"
    timeout "$(cap 60)" $py -m pytest -q -p no:cacheprovider tests/test_cuda.py \
        2>&1 | tail -n 15
}

checks() {
    step "device"
    nvidia-smi -L
    $py -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
    step "CUDA tests"
    $py -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tail -n 15
    for extra in "" "--set train.batch_tokens=8192" "--set train.compile=true" \
        "--set train.compile=true --set train.batch_tokens=8192"; do
        step "training throughput, bf16 autocast $extra"
        # compiling starts from empty caches, so the wall time includes all of it
        start=$SECONDS
        # shellcheck disable=SC2086  # $extra is a list of options
        TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) \
            $py benchmarks/train_throughput.py --device cuda --data "$data" --steps 300 \
            --warmup-steps 30 $extra 2>&1 | grep -v Warning
        echo "wall time, setup and compiling included: $((SECONDS - start)) s"
    done
    step "attention scaling"
    $py benchmarks/attention_scaling.py --device cuda 2>&1 | tail -n 50
    $py benchmarks/attention_scaling.py --device cuda --sizes 4096 --rounds 3 2>&1 | tail -n 20
    step "DDP over NCCL (torchrun, one process per GPU)"
    nproc=$($py -c "import torch; print(torch.cuda.device_count())")
    if ((nproc < 2)); then  # one process is not data-parallel; NCCL needs a GPU per rank
        echo "skipped: $nproc GPU(s); DDP over NCCL needs at least 2"
        return
    fi
    rm -rf /tmp/nmt-ddp
    torchrun --nproc_per_node="$nproc" -m nmt train recipes/multi30k-de-en.yaml \
        --device cuda --set "data.dir=$data" --set run_dir=/tmp/nmt-ddp \
        --set train.max_steps=300 --set train.warmup=100 --set train.valid_every=300 2>&1 | tail -n 12
}

converge() {
    # Four runs share the GPU (each is bound by kernel launches, not by the GPU).
    export OMP_NUM_THREADS=4
    budget=${MINUTES:-7}
    runs=(multi30k-de-en multi30k-en-de multi30k-de-en-ss multi30k-de-en-b8k)
    for run in "${runs[@]}"; do
        rm -rf "/tmp/nmt-$run"
        extra=()  # the fourth: four times the batch, for GPU-sized steps
        [[ $run == *-b8k ]] && extra=(--set train.batch_tokens=8192 --set train.lr=1.0e-3
            --set train.warmup=500 --set train.valid_every=150)
        # the regime alone against teacher forcing: without the recipe's joined captions
        [[ $run == *-ss ]] && extra=(--set 'data.join={}')
        $py -m nmt train "recipes/${run%-b8k}.yaml" --device cuda --set "data.dir=$data" \
            --set "run_dir=/tmp/nmt-$run" --set train.valid_every=500 \
            --set "train.max_minutes=$budget" "${extra[@]}" >"$out/$run.log" 2>&1 &
    done
    wait
    $py -m nmt compare --runs /tmp/nmt-multi30k-de-en --runs /tmp/nmt-multi30k-de-en-ss \
        --out /tmp/nmt-tf-vs-ss --device cuda >"$out/compare.log" 2>&1
    tail -n 25 /tmp/nmt-tf-vs-ss/report.md
    tar czf "$out/runs.tar.gz" -C /tmp --exclude='*.pt' "${runs[@]/#/nmt-}" nmt-tf-vs-ss
    for run in "${runs[@]}"; do
        step "$run"
        tail -n 6 "$out/$run.log"
        cat "/tmp/nmt-$run/results.json"
    done
}

ttq() {
    # One run at a time: a time is only a time on a GPU of its own. Settings are
    # separated by ';', each a list of recipe overrides. The shipped recipe first,
    # then GPU-sized batches over fewer updates (a small batch leaves a GPU waiting
    # on kernel launches, so a larger one costs little more per step).
    local default="train.seed=1;train.batch_tokens=4096 train.max_steps=1500 train.warmup=200"
    default+=";train.batch_tokens=8192 train.max_steps=1000 train.warmup=150 train.lr=3e-3"
    IFS=';' read -ra settings <<<"${SETTINGS:-$default}"
    split=${SPLIT:-val}
    for setting in "${settings[@]}"; do
        sets=()
        for s in $setting; do sets+=(--set "$s"); done
        name=$(echo "$setting" | tr ' =' '_-' | tr -cd '[:alnum:]_.-')
        step "time to quality on $split: $setting"
        rm -rf "/tmp/nmt-ttq-$name"
        $py benchmarks/time_to_quality.py recipes/multi30k-de-en.yaml --device cuda \
            --data "$data" --split "$split" --every "${EVERY:-250}" \
            --run-dir "/tmp/nmt-ttq-$name" "${sets[@]}" 2>&1 | grep -v Warning | tail -n 16
        cp "/tmp/nmt-ttq-$name/time_to_quality-$split.json" "$out/ttq-$name-$split.json"
        [[ -n ${ALSO:-} ]] || continue
        $py benchmarks/time_to_quality.py recipes/multi30k-de-en.yaml --device cuda \
            --data "$data" --split "$ALSO" --run-dir "/tmp/nmt-ttq-$name" --score-only \
            2>&1 | grep -v Warning | tail -n 16
        cp "/tmp/nmt-ttq-$name/time_to_quality-$ALSO.json" "$out/ttq-$name-$ALSO.json"
    done
}

mps() {
    # MPS lets the runs' small kernels share the GPU's SMs instead of taking turns
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
    [[ -e $CUDA_MPS_PIPE_DIRECTORY/control ]] && return
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d && $py -c "import torch; torch.ones(1, device='cuda')"; then
        echo "MPS on"
    else
        echo quit | nvidia-cuda-mps-control 2>/dev/null
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        echo "MPS unavailable: the runs take turns on the GPU"
    fi
}

study() {
    mps
    [[ $(realpath data/multi30k 2>/dev/null) == "$data" ]] || ln -sfn "$data" data/multi30k
    export OMP_NUM_THREADS=1
    deadline=$((SECONDS + ${WAIT:-540}))
    # the length study first: it trains the headline's runs too (their out_dir is
    # shared), so the headline's own report is a cheap evaluation in a later call
    specs=(${SPECS:-compare-multi30k-length compare-multi30k-train-short compare-multi30k})
    outdir() { $py -c "import yaml; print(yaml.safe_load(open('recipes/$1.yaml'))['out_dir'])"; }
    # a spec is done when its out_dir's results.json has every split and variant it names
    # and no failed run
    # (two specs may share an out_dir: the length study reuses the headline's runs)
    reported_spec() {
        $py - "$1" <<'PY'
import json, pathlib, sys, yaml
spec = yaml.safe_load(open(f"recipes/{sys.argv[1]}.yaml"))
results = pathlib.Path(spec["out_dir"]) / "results.json"
if not results.exists():
    sys.exit(1)
report = json.loads(results.read_text())
have = {(r["variant"], r["split"]) for r in report["rows"]}
want = {(v, s) for v in spec["variants"] for s in spec.get("splits") or []}
sys.exit(0 if want <= have and not report.get("failed") else 1)  # a failed seed: not done
PY
    }
    busy=()  # out_dirs of the specs running now: one compare at a time in each
    for spec in "${specs[@]}"; do
        log="runs/$spec.log"
        mkdir -p runs
        if [[ -e runs/$spec.pid ]] && kill -0 "$(cat "runs/$spec.pid")" 2>/dev/null; then
            busy+=("$(outdir "$spec")")
            continue  # started by an earlier call, still running
        fi
        reported_spec "$spec" && continue
        if [[ " ${busy[*]} " == *" $(outdir "$spec") "* ]]; then
            echo "$spec waits for the study in $(outdir "$spec") (a later call starts it)"
            continue
        fi
        busy+=("$(outdir "$spec")")
        # MPS serves at most 48 clients on a GPU: a 49th run failed at its first
        # kernel ("CUDA-capable device(s) is/are busy or unavailable")
        jobs=$($py -c "import yaml; s = yaml.safe_load(open('recipes/$spec.yaml'))
print(min(48, len(s['variants']) * len(s['seeds'])))")
        setsid $py -m nmt compare "recipes/$spec.yaml" --device cuda --jobs "$jobs" \
            >>"$log" 2>&1 </dev/null &
        echo $! >"runs/$spec.pid"
        echo "started $spec: $jobs runs at once"
    done
    reported() {
        for spec in "${specs[@]}"; do reported_spec "$spec" || return 1; done
    }
    while ((SECONDS < deadline)) && ! reported; do
        sleep $((deadline - SECONDS < 20 ? deadline - SECONDS : 20))  # not past WAIT
    done
    step "progress"
    $py - <<'PY'
import json, pathlib
for run in sorted(pathlib.Path("runs").glob("*/runs/*/seed*")):
    lines = (run / "metrics.jsonl").read_text().splitlines() if (run / "metrics.jsonl").exists() else []
    last = json.loads(lines[-1]) if lines else {}
    done = "done" if (run / "summary.json").exists() else "..."
    print(f"{run}: step {last.get('step', 0)}, {last.get('elapsed', 0):.0f} s {done}")
PY
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
    for spec in "${specs[@]}"; do
        report=$(outdir "$spec")/report.md
        [[ -e $report ]] && tail -n 30 "$report"
        tail -n 3 "runs/$spec.log" 2>/dev/null
    done
    tar czf "$out/study.tar.gz" --exclude='*.pt' --exclude='spm.*' runs 2>/dev/null
}

"$mode"
