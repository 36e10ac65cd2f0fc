"""What a run records of the machine it ran on, and the bf16 instructions that
decide whether ``train.precision: bf16`` pays on a CPU."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest
import torch

from nmt.setup.device import bf16_units, cpu_model, where_it_ran
from nmt.training.run import prepare
from nmt.training.trainer import SOFTWARE_BF16
from tests.conftest import subprocess_env

# the flag lines of /proc/cpuinfo, cut short, on three x86 CPUs and an Arm one
ZEN4 = "flags\t\t: fpu vme avx2 avx512f avx512_bf16 avx512_vnni\n"
SAPPHIRE_RAPIDS = "flags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n"
SKYLAKE = "flags\t\t: fpu vme avx2 avx512f avx512bw avx512vl\n"
NEOVERSE_V2 = "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics bf16 i8mm\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (ZEN4, True),
        (SAPPHIRE_RAPIDS, True),
        (NEOVERSE_V2, True),
        (SKYLAKE, False),
        (f"processor\t: 0\n{SKYLAKE}\nprocessor\t: 1\n{SKYLAKE}", False),
        ("processor\t: 0\nmodel name\t: a CPU\n", None),  # no flag line: unknown
    ],
)
def test_bf16_units_are_read_from_the_cpus_flags(tmp_path, text, expected):
    info = tmp_path / "cpuinfo"
    info.write_text(text)
    assert bf16_units(info) is expected


def test_without_a_cpuinfo_file_the_bf16_units_are_unknown(tmp_path):
    assert bf16_units(tmp_path / "missing") is None


def test_a_run_records_whether_its_cpu_has_bf16_units():
    ran = where_it_ran(torch.device("cpu"))
    assert ran["bf16_units"] is bf16_units()


def test_a_run_records_the_versions_of_the_libraries_its_figures_depend_on():
    import numpy
    import sacrebleu
    import sentencepiece

    ran = where_it_ran(torch.device("cpu"))["libraries"]
    assert ran == {
        "sentencepiece": sentencepiece.__version__,
        "numpy": numpy.__version__,
        "sacrebleu": sacrebleu.__version__,
    }


@pytest.mark.slow  # a fresh interpreter that imports torch (the marker's rule)
def test_a_run_records_the_instruction_set_of_pytorchs_cpu_kernels():
    """On one machine, kernels for another instruction set alone train other losses
    (docs/compare.md), so the record follows what ATen runs, an override included."""
    assert where_it_ran(torch.device("cpu"))["kernels"] == torch.backends.cpu.get_cpu_capability()
    code = "import torch; from nmt.setup.device import where_it_ran as w; "
    code += "print(w(torch.device('cpu'))['kernels'])"
    env = {**subprocess_env(), "ATEN_CPU_CAPABILITY": "default"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "DEFAULT"


@pytest.mark.parametrize("units", [True, False, None])
def test_bf16_training_on_a_cpu_without_bf16_units_says_so_as_it_starts(
    tiny_config, monkeypatch, units
):
    """The start line says that bf16 products are emulated where the CPU reports no
    bf16 instructions, and only there (not where it has them or cannot tell), and
    never for fp32."""
    monkeypatch.setattr("nmt.training.trainer.bf16_units", lambda: units)
    bf16 = prepare(tiny_config(train={"precision": "bf16"}), "cpu").describe()
    fp32 = prepare(tiny_config(train={"precision": "fp32"}), "cpu").describe()
    assert (SOFTWARE_BF16 in bf16) is (units is False)
    assert "(bf16 autocast)" in bf16 and SOFTWARE_BF16 not in fp32


# the first core's lines of /proc/cpuinfo on two virtual machines, cut short
XEON_VM = "cpu family\t: 6\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) Processor\n"
EPYC_VM = "cpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n"
XEON = "Intel(R) Xeon(R) Processor (family 6, model 207)"
GRACE = "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n"
GRACE_PART = "(implementer 0x41, part 0xd4f)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"processor\t: 0\n{XEON_VM}", XEON),
        (f"processor\t: 0\n{XEON_VM}\nprocessor\t: 1\n{XEON_VM}", XEON),  # one per core
        (XEON_VM.replace("Processor", "CPU @ 2.20GHz"), XEON.replace("Processor", "CPU @ 2.20GHz")),
        (f"processor\t: 0\n{EPYC_VM}", "AMD EPYC 7B13 64-Core Processor"),  # a model number
        ("processor\t: 0\nmodel name\t: a CPU\n", "a CPU"),  # no numbers to add
        (f"processor\t: 0\n{NEOVERSE_V2}{GRACE}", f"{platform.machine()} CPU {GRACE_PART}"),
    ],
)
def test_a_cpu_name_without_a_model_number_gets_its_family_and_model(tmp_path, text, expected):
    """A virtual machine's "Intel(R) Xeon(R) Processor" names several generations of
    CPU: the name alone is kept only where it says which model it is."""
    info = tmp_path / "cpuinfo"
    info.write_text(text)
    assert cpu_model(info) == expected
