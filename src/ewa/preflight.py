"""`ewa preflight`: what a node needs before hours of queueing, checked on that node. The sandbox end to
end (a tiny program, then a containment probe), the judge's interpreter against the benchmarks' Python,
the GPU stack where GPUs are asked for or visible (driver vs torch's CUDA, vLLM, DeepSpeed's CPU Adam under
optimizer offload), the config's Hugging Face names in this node's cache (ewa.hub), the settings and the warm
start asked of the model's chat template (ewa.capabilities) and free disk against `ewa plan`. Each failure is
one line naming the node, the check and the fix; any failure exits 2 (warnings do not). The workflow runs it
first on every partition (rules/preflight.smk)."""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ewa.errors import UserError

# The oldest interpreter each format's programs parse and run on is the format's (ewa.formats.Format.min_python);
# a floor below the fork server's own (3.9, ewa.sandbox.backends.MIN_PYTHON) is checked as a failure of that.
SANDBOX_FIX = ("install bubblewrap and allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), "
               "or set sandbox.backend: docker and run make docker-sandbox")
DOCKER_FIX = ("start the Docker engine and run make docker-sandbox on this node (it builds sandbox.docker_image), "
              "or set sandbox.backend: bwrap with bubblewrap installed and unprivileged user namespaces allowed")
GPU_ENV_FIX = "run the jobs in the GPU environment (make setup-gpu; source .venv-gpu/bin/activate)"
# The containment probe, run inside the sandbox: each escape it manages is named in its JSON answer.
PROBE = """import json, os, socket
escaped = {}
s = socket.socket()
s.settimeout(2)
try:
    s.connect(("127.0.0.1", PORT))
    escaped["network"] = "connected to the host's 127.0.0.1:PORT"
except OSError:
    pass
for path in READ:
    try:
        with open(path, "rb") as f:
            f.read(1)
        escaped.setdefault("read", "read " + path)
    except OSError:
        pass
try:
    with open(os.path.join(WRITE, "escaped"), "w") as f:
        f.write("x")
    escaped["write"] = "wrote into " + WRITE
except OSError:
    pass
print(json.dumps(escaped))
"""


@dataclass
class Check:
    name: str
    status: str  # ok | warning | failed | skipped
    detail: str
    fix: str = ""
    data: dict = field(default_factory=dict)

    def line(self, node: str) -> str:
        """The check as one line (a failure or a warning names its fix)."""
        text = f"ewa preflight: {node}: {self.name} {self.status}: {self.detail}"
        if self.fix and self.status in ("failed", "warning"):
            text += f"; fix: {self.fix}"
        return " ".join(text.split())  # one line, whatever the messages it quotes hold


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


def fmt(version) -> str:
    return ".".join(map(str, version))


def min_python(config: dict) -> tuple[tuple[int, int], list[str]]:
    """The judge interpreter the config's datasets need, and the formats that need it."""
    from ewa import formats as registry

    formats = {config["train_data"]["format"], *(b["format"] for b in config["benchmarks"].values())}
    floors = {f: registry.get(f).min_python for f in formats}
    need = max(floors.values())
    return need, sorted(f for f in formats if floors[f] == need)


def needs_vllm(config: dict) -> str:
    """Whether a GPU job of this config runs vLLM: "required" (colocated in training, or sample.backend
    vllm), "optional" (sample.backend auto: vLLM where it runs, else transformers) or "no"."""
    if config["grpo"]["use_vllm"] or config["sample"]["backend"] == "vllm":
        return "required"
    return "optional" if config["sample"]["backend"] == "auto" else "no"


# -- the sandbox and its interpreter -----------------------------------------------------------------
def sandbox_fix(backend: str) -> str:
    return DOCKER_FIX if backend == "docker" else SANDBOX_FIX


def containment(sb, probe_root: Path) -> dict:
    """Run the probe; the escapes it managed (empty: contained). A listener on the host's loopback, a
    world-writable directory and a world-readable canary beside it give each escape a fair chance."""
    probe_dir = Path(tempfile.mkdtemp(prefix=".preflight-probe-", dir=probe_root))
    listener = socket.socket()
    try:
        probe_dir.chmod(0o777)
        canary = probe_dir / "canary"
        canary.write_text(uuid.uuid4().hex)
        canary.chmod(0o644)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        venv = Path(sys.prefix) / "pyvenv.cfg"
        reads = [str(canary)] + ([str(venv)] if venv.is_file() else [])
        code = (PROBE.replace("PORT", str(port)).replace("READ", repr(reads))
                .replace("WRITE", repr(str(probe_dir))))
        run = sb.run_code(code, time_limit_s=10, memory_limit_mb=256, scaled=False)
        if run.status != "ok":
            raise RuntimeError(f"the containment probe ended {run.status}: {(run.stderr.strip().splitlines() or [''])[-1]}")
        return json.loads(run.stdout.strip().splitlines()[-1])
    finally:
        listener.close()
        shutil.rmtree(probe_dir, ignore_errors=True)


def sandbox_checks(section: dict, whole: dict, probe_root: Path) -> tuple[list[Check], dict]:
    """The interpreter (found, and new enough for the datasets) and the sandbox (starts, runs a program,
    contains the probe); the judge interpreter's version for the record."""
    from ewa.sandbox import sandbox_from_config
    from ewa.sandbox.backends import SandboxSettings, interpreter, resolve_auto

    python, backend = section["python"], section["backend"]
    name = backend
    if backend == "auto":
        try:
            name = resolve_auto(SandboxSettings(backend=backend, python=python, docker_image=section["docker_image"],
                                                max_source_bytes=section["max_source_bytes"]))
        except UserError:
            name = "bwrap"  # neither works; the interpreter is checked first, then the sandbox says why
    host_version = None
    if name != "docker":  # docker runs the image's interpreter
        try:
            host_version = fmt(interpreter(python)["version"])
        except UserError as e:
            fix = "install it, or point sandbox.python at a Python >= 3.9 present at the same path on every node"
            return [Check("interpreter", "failed", str(e), fix),
                    Check("sandbox", "skipped", "not started: sandbox.python does not run")], {}
    versions: dict = {}
    checks = []
    try:
        with sandbox_from_config(section, workers=1, time_factor=1.0) as sb:
            versions = {"sandbox_backend": sb.backend.name, "judge_python": sb.python_version}
            run = sb.run_code("print(sum(map(int, input().split())))", stdin="2 3", time_limit_s=10, scaled=False)
            if run.status != "ok" or run.stdout.strip() != "5":
                raise RuntimeError(f"a program adding 2 and 3 gave {run.status} {run.stdout.strip()!r} "
                                   f"{(run.stderr.strip().splitlines() or [''])[-1]}")
            escaped = containment(sb, probe_root)
            isolated = sb.backend.isolated
    except (ValueError, RuntimeError, OSError) as e:  # UserError included
        checks.append(Check("sandbox", "failed", f"{name}: {e}", sandbox_fix(name)))
    else:
        where = f"{sb.backend.name} ran a program and contained the probe (network, write, read)"
        if not escaped:
            checks.append(Check("sandbox", "ok", where))
        elif not isolated:  # `process` was asked for by name: rlimits only, as documented
            checks.append(Check("sandbox", "warning", f"process is not isolated: model code {', '.join(escaped.values())}",
                                "set sandbox.backend: bwrap or docker"))
        else:
            checks.append(Check("sandbox", "failed", f"{sb.backend.name} does not contain model code: "
                                f"{', '.join(escaped.values())}", sandbox_fix(sb.backend.name)))
    judge = versions.get("judge_python") or host_version
    need, formats = min_python(whole)
    if judge is None:
        checks.insert(0, Check("interpreter", "skipped", "the sandbox did not start, so its interpreter is unknown"))
    elif version_tuple(judge) < need:
        where = f"sandbox.python of {section['docker_image']}" if name == "docker" else f"sandbox.python {python}"
        fix = ("rebuild sandbox.docker_image with a newer Python (make docker-sandbox)" if name == "docker" else
               f"set sandbox.python to another interpreter (Python >= {fmt(need)}, the same path on every node)")
        checks.insert(0, Check("interpreter", "warning", f"{where} is Python {judge}; {' and '.join(formats)} "
                               f"programs need Python >= {fmt(need)} (newer syntax is judged CE)", fix))
    else:
        checks.insert(0, Check("interpreter", "ok", f"{python if name != 'docker' else 'the image'} is Python "
                               f"{judge} (>= {fmt(need)} for {' and '.join(formats)})"))
    return checks, {"judge_python": judge, **versions}


# -- GPUs -------------------------------------------------------------------------------------------
def run_python(code: str, timeout: float = 600) -> dict:
    """`code` in a fresh interpreter of this environment (heavy imports stay out of this process); the
    JSON object it prints last, or {"error": why}."""
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": str(e)}
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1][:300]}


def nvidia_smi_cuda() -> tuple[int, int] | None:
    """The newest CUDA the driver supports, as nvidia-smi prints it; None without one."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", out)
    return (int(m[1]), int(m[2])) if m else None


def gpus_visible() -> bool:
    return any(Path("/dev").glob("nvidia[0-9]*")) or nvidia_smi_cuda() is not None


def driver_problem(torch_cuda: str, driver: tuple[int, int] | None) -> str | None:
    """Why the driver cannot run this torch build, or None. Within a major version the driver runs newer
    runtimes (CUDA minor version compatibility), so only an older major fails."""
    if driver is None:
        return f"torch is a CUDA {torch_cuda} build but no NVIDIA driver answers (nvidia-smi, cuDriverGetVersion)"
    if driver[0] < version_tuple(torch_cuda)[0]:
        return f"the driver supports CUDA up to {fmt(driver)}; torch is a CUDA {torch_cuda} build"
    return None


def nvcc_release(cuda_home: str | None) -> tuple[str | None, str | None]:
    """The nvcc DeepSpeed would compile with (CUDA_HOME's, else the PATH's) and its release."""
    nvcc = str(Path(cuda_home) / "bin" / "nvcc") if cuda_home else shutil.which("nvcc")
    if not nvcc or not os.access(nvcc, os.X_OK):
        return None, None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return nvcc, None
    m = re.search(r"release (\d+\.\d+)", out)
    return nvcc, m[1] if m else None


TORCH_PROBE = """import json, torch
out = {"torch": torch.__version__, "cuda": torch.version.cuda}
if torch.version.cuda:
    try:
        v = torch._C._cuda_getDriverVersion()
        out["driver"] = [v // 1000, v % 1000 // 10] if v else None
    except Exception:
        out["driver"] = None
    out["devices"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(json.dumps(out))
"""
DEEPSPEED_PROBE = """import json
out = {}
try:
    import deepspeed
    out["deepspeed"] = deepspeed.__version__
    from deepspeed.git_version_info import installed_ops
    out["prebuilt"] = bool(installed_ops.get("cpu_adam"))
    from deepspeed.ops.op_builder import CPUAdamBuilder
    out["compatible"] = bool(CPUAdamBuilder().is_compatible(verbose=False))
except Exception as e:
    out["error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def gpu_checks(gpus: int, accelerate_config: str | None, vllm: str) -> tuple[list[Check], dict]:
    """Driver vs torch's CUDA, vLLM, DeepSpeed's CPU Adam: on a node that asks for or shows GPUs. What a job
    asks for fails; what a node merely shows (the miniature on a workstation) only warns."""
    visible = gpus_visible()
    if not gpus and not visible:
        return [Check("gpu", "skipped", "no GPU asked for (--gpus 0) and none visible (no /dev/nvidia*, no nvidia-smi)")], {}
    bad = "failed" if gpus else "warning"
    torch = run_python(TORCH_PROBE)
    versions = {k: torch.get(k) for k in ("torch", "cuda", "driver", "devices") if k in torch}
    if "error" in torch:
        return [Check("gpu", bad, f"torch does not import: {torch['error']}", GPU_ENV_FIX)], versions
    if not torch["cuda"]:
        if not gpus:
            return [Check("gpu", "skipped", f"torch {torch['torch']} is a CPU build (GPUs visible, none asked for)")], versions
        return [Check("gpu", bad, f"this job asks for {gpus} GPU(s) but torch {torch['torch']} is a CPU build",
                      GPU_ENV_FIX)], versions
    driver = tuple(torch["driver"]) if torch.get("driver") else nvidia_smi_cuda()
    checks = []
    if why := driver_problem(torch["cuda"], driver):
        checks.append(Check("cuda driver", bad, why, f"update the NVIDIA driver to one for CUDA {torch['cuda']} "
                            f"(>= 580 for 13.0), or install a torch build for the driver's CUDA"))
    elif gpus and not torch["devices"]:
        checks.append(Check("cuda driver", bad, f"this job asks for {gpus} GPU(s) but torch sees none "
                            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})",
                            "check the profile's gpu/gres request and the node's driver (nvidia-smi)"))
    else:
        checks.append(Check("cuda driver", "ok", f"driver CUDA {fmt(driver)} runs torch {torch['torch']} "
                            f"(CUDA {torch['cuda']}); {torch['devices']} GPU(s) visible"))
    if vllm == "no":
        checks.append(Check("vllm", "skipped", "not used (grpo.use_vllm false, sample.backend hf)"))
    else:
        got = run_python("import json, vllm; print(json.dumps({'vllm': vllm.__version__}))")
        versions["vllm"] = got.get("vllm")
        if "error" not in got:
            checks.append(Check("vllm", "ok", f"vllm {got['vllm']} imports"))
        elif vllm == "required":
            checks.append(Check("vllm", bad, f"vllm does not import: {got['error']}", GPU_ENV_FIX))
        else:  # sample.backend auto samples with transformers instead: correct, far slower at scale
            checks.append(Check("vllm", "warning", f"vllm does not import ({got['error']}), so sample.backend auto "
                                f"samples with transformers", GPU_ENV_FIX))
    checks.append(deepspeed_check(accelerate_config, torch["cuda"], versions, bad))
    return checks, versions


def deepspeed_check(accelerate_config: str | None, torch_cuda: str, versions: dict, bad: str) -> Check:
    """With the optimizer offloaded, accelerate runs DeepSpeedCPUAdam: prebuilt, or compiled on first use
    with g++ and an nvcc of torch's CUDA major version."""
    from ewa.plan.memory import read_sharding

    try:
        sharding = read_sharding(accelerate_config)
    except ValueError as e:
        return Check("deepspeed cpu_adam", "failed", str(e), "name a shipped accelerate config or an existing file")
    if not sharding.offload_optimizer:
        return Check("deepspeed cpu_adam", "skipped", f"no optimizer offload ({sharding.source})")
    got = run_python(DEEPSPEED_PROBE)
    versions["deepspeed"] = got.get("deepspeed")
    fix = (f"module load cuda/{torch_cuda} (or set CUDA_HOME to a CUDA {torch_cuda} toolkit) and put g++ on the "
           f"PATH, or install DeepSpeed with DS_BUILD_CPU_ADAM=1")
    if "error" in got:
        return Check("deepspeed cpu_adam", bad, f"deepspeed does not import: {got['error']}", GPU_ENV_FIX)
    if got.get("prebuilt"):
        return Check("deepspeed cpu_adam", "ok", f"deepspeed {got['deepspeed']} ships cpu_adam prebuilt")
    nvcc, release = nvcc_release(os.environ.get("CUDA_HOME"))
    missing = []
    if not got.get("compatible"):
        missing.append("CPUAdamBuilder is not compatible here")
    if not shutil.which(os.environ.get("CXX", "g++")):
        missing.append(f"no {os.environ.get('CXX', 'g++')} on the PATH")
    if not release:
        missing.append("no nvcc (CUDA_HOME unset and none on the PATH)" if not nvcc else f"{nvcc} gives no release")
    elif version_tuple(release)[0] != version_tuple(torch_cuda)[0]:
        missing.append(f"{nvcc} is CUDA {release}, torch CUDA {torch_cuda}")
    if missing:
        return Check("deepspeed cpu_adam", bad, f"{sharding.source} offloads the optimizer, so DeepSpeedCPUAdam "
                     f"compiles on first use, but {'; '.join(missing)}", fix)
    return Check("deepspeed cpu_adam", "ok", f"cpu_adam compiles on first use (g++, {nvcc} CUDA {release})")


# -- disk -------------------------------------------------------------------------------------------
def bytes_under(root: Path) -> int:
    """Bytes the files under `root` occupy, each inode once (init hard-links the base model)."""
    seen, total = set(), 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def disk_check(configfile: str | None, profile: str | None, results: Path) -> Check:
    """Free space where results/ lives against the peak `ewa plan` gives this config on this profile,
    less what results/ already holds (a resumed run)."""
    if not configfile:
        return Check("disk", "skipped", "no whole experiment to plan (--configfile, or --config naming a file)")
    from ewa.plan.cli import add_plan_arguments, build_plan

    parser = argparse.ArgumentParser(add_help=False)
    add_plan_arguments(parser)
    args = parser.parse_args(["--configfile", configfile, *(["--profile", profile] if profile else [])])
    try:
        plan = build_plan(args)
    except (UserError, OSError) as e:
        return Check("disk", "warning", f"ewa plan cannot cost {configfile}: {e}",
                     f"run ewa plan --configfile {configfile} and fix what it names")
    need = plan["disk"]["peak_gb"]
    existing = next(p for p in (results, *results.absolute().parents) if p.exists())
    held = bytes_under(results) / 1e9 if results.is_dir() else 0.0
    free = shutil.disk_usage(existing).free / 1e9
    data = {"peak_gb": need, "held_gb": round(held, 1), "free_gb": round(free, 1), "filesystem_of": str(existing)}
    to_write = max(0.0, need - held)
    if free < to_write:
        return Check("disk", "failed", f"{existing.absolute()}: {free:,.1f} GB free, but this run holds up to "
                     f"{need:,.1f} GB at its peak ({held:,.1f} GB of it already under {results})",
                     f"free {to_write - free:,.1f} GB there or run from a larger filesystem (ewa plan --configfile "
                     f"{configfile} itemises the peak)", data)
    return Check("disk", "ok", f"{free:,.1f} GB free for a peak of {need:,.1f} GB ({held:,.1f} GB already written)",
                 data=data)


# -- the model --------------------------------------------------------------------------------------
def hub_check(whole: dict, configfile: str | None) -> tuple[Check, dict | None]:
    """The config's Hugging Face references (ewa.hub) in this node's cache, whole, as its jobs read them
    offline; and the config with each as its local path (None when one is missing)."""
    from ewa.hub import cache_dir, localized, references, resolve_config, stage_command

    try:
        if not references(whole):
            return Check("hub cache", "skipped", "the config names no Hugging Face repository"), whole
        resolved = resolve_config(whole, configfile=configfile)
    except UserError as e:
        return Check("hub cache", "failed", str(e), f"run {stage_command(configfile)} on a node with network and "
                     f"set HF_HOME here to the cache it staged into"), None
    staged = ", ".join(f"{r.ref.uri(r.commit[:12])}" for r in resolved.values())
    return (Check("hub cache", "ok", f"{staged} in {cache_dir()}", data={k: r.record() for k, r in resolved.items()}),
            localized(whole, resolved))


def chat_template_check(whole: dict) -> Check:
    """The settings asked for against the model's chat template, and a warm start (model.sft) against its
    generation markers (ewa.capabilities, what the workflow refuses at plan time), read on this node: the
    model directory must be there too."""
    from ewa.capabilities import refusal, warm_start_refusal

    init, settings = whole["model"]["init"], whole["sample"]["settings"]
    if init == "tiny":
        return Check("chat template", "skipped", "the tiny init's template is the pipeline's own (built by ewa init)")
    if refused := refusal(init, settings, whole["sample"]) or warm_start_refusal(init, whole["model"]["sft"]):
        return Check("chat template", "failed", f"key '{refused.key}': {refused.why}",
                     refused.fix or "point model.init at a Hugging Face model directory readable on this node")
    sft = " and can train the warm start (model.sft)" if whole["model"]["sft"]["steps"] else ""
    return Check("chat template", "ok", f"{init} renders and parses {', '.join(settings)}{sft}")


# -- the command ------------------------------------------------------------------------------------
def add_preflight_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", metavar="FILE",
                   help="the whole experiment, read as ewa plan reads it: the disk peak, the datasets' Python, "
                        "whether vLLM runs; alone, also the sandbox it checks, as with --config FILE (default: "
                        "--config when it names a file)")
    p.add_argument("--profile", metavar="DIR", help="the Snakemake profile, for the plan's disk figure")
    p.add_argument("--gpus", type=int, default=0, help="GPUs this job asks for; with 0 and none visible the GPU "
                                                       "checks are skipped")
    p.add_argument("--results", default="results", help="the results directory whose filesystem must hold the run")
    p.add_argument("--out", help="where to write the JSON record (node, checks, versions)")


def preflight(args: argparse.Namespace, config: dict) -> int:
    from ewa.config import load
    from ewa.io import versions, write_json

    node = socket.gethostname()
    configfile = args.configfile or (args.config if args.config and os.path.isfile(args.config) else None)
    whole = load(configfile) if configfile else config
    if args.configfile and not args.config:  # `--configfile FILE` alone: that file's sandbox, as `--config FILE`
        config = whole
    results = Path(args.results)
    probe_root = Path(args.out).absolute().parent if args.out else (results if results.is_dir() else Path.cwd())
    probe_root.mkdir(parents=True, exist_ok=True)
    checks, judge = sandbox_checks(config["sandbox"], whole, probe_root)
    gpu, gpu_versions = gpu_checks(args.gpus, config["grpo"]["accelerate_config"], needs_vllm(whole))
    checks += gpu
    hub, local = hub_check(whole, configfile)
    checks.append(hub)
    checks.append(chat_template_check(local) if local is not None else
                  Check("chat template", "skipped", "the model is not in this node's Hugging Face cache"))
    checks.append(disk_check(configfile, args.profile, results))
    for c in checks:
        print(c.line(node), file=sys.stderr if c.status in ("failed", "warning") else sys.stdout)
    failed = [c.name for c in checks if c.status == "failed"]
    if args.out:
        write_json(args.out, {"node": node, "ok": not failed, "failed": failed, "gpus_asked": args.gpus,
                              "checks": {c.name: {"status": c.status, "detail": c.detail, "fix": c.fix, **c.data}
                                         for c in checks},
                              "versions": {**versions(), **judge, **gpu_versions}})
    return 2 if failed else 0


COMMANDS = {"preflight": (add_preflight_arguments, preflight)}
