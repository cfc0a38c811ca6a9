"""Which device and which precision a training run uses.

The rule (the course's most common failure is getting it wrong on a free Colab T4):

* CUDA GPU with compute capability >= 8.0 (Ampere: A100, A10G, RTX 30xx and newer) -> bf16.
* Older CUDA GPU (T4 = 7.5, V100 = 7.0) -> fp16. ``torch.cuda.is_bf16_supported()`` answers *yes*
  on a T4, because bf16 is emulated there; emulated bf16 trains several times slower, so we look at
  the compute capability instead.
* CPU (and Apple MPS) -> fp32 by default. On a CPU that multiplies bf16 in hardware (Intel AMX, or
  AVX512-BF16) the standalone loop's opt-in ``bf16=True`` is allowed: measured 1.30x faster a step on a
  2-core Xeon with AMX, about fp32's speed on an AVX512-BF16 CPU without AMX (README.md). Without either,
  torch emulates bf16, slower than fp32, and ``bf16=True`` is refused (:func:`require_native_bf16`).

Everything here is a pure function of (device, capability) so it can be tested without a GPU;
``detect_*`` functions read the real machine.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Precision",
    "choose_precision",
    "cpu_bf16_kind",
    "cpu_has_native_bf16",
    "cuda_available",
    "detect_cuda_capability",
    "detect_precision",
    "require_cuda",
    "require_native_bf16",
    "supports_bf16",
]

# bf16 tensor cores arrived with Ampere (sm_80); below that bf16 is emulated.
BF16_MIN_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class Precision:
    """The precision choice for one run.

    device: "cuda", "mps" or "cpu".
    dtype: the name of the torch dtype to load weights in ("bfloat16", "float16", "float32").
    bf16 / fp16: the TrainingArguments/GRPOConfig flags (mixed precision); both False means fp32.
    reason: one sentence a user can read to see why this was chosen.
    """

    device: str
    dtype: str
    bf16: bool
    fp16: bool
    reason: str

    def trainer_kwargs(self) -> dict[str, bool]:
        """GRPOConfig/TrainingArguments precision flags. Both are always given explicitly: TRL's
        config sets ``bf16=True`` when neither is set, which a T4 cannot run natively."""
        kwargs = {"bf16": self.bf16, "fp16": self.fp16}
        if self.device == "cpu":
            kwargs["use_cpu"] = True
        return kwargs

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)


def cpu_bf16_kind() -> str | None:
    """How this CPU multiplies bf16 in hardware: ``"amx"`` (Intel AMX tiles), ``"avx512_bf16"``, or None (torch
    emulates bf16 there, slower than fp32). Read from torch's own CPU capability checks."""
    import torch

    for kind, check in (
        ("amx", getattr(torch.cpu, "_is_amx_tile_supported", None)),
        ("avx512_bf16", getattr(torch.cpu, "_is_avx512_bf16_supported", None)),
    ):
        if check is not None and check():
            return kind
    return None


def cpu_has_native_bf16() -> bool:
    """True when this CPU multiplies bf16 in hardware (Intel AMX tiles or AVX512-BF16), so that bf16 matmuls
    are faster than fp32 ones; elsewhere torch emulates bf16 on CPU, slower than fp32."""
    return cpu_bf16_kind() is not None


def require_native_bf16(device_type: str, *, bf16: bool, bf16_sampling: bool) -> None:
    """Where the standalone loop's ``bf16=True`` or ``bf16_sampling=True`` is asked for, raise a one-line
    ``ValueError`` naming that setting and the fix unless ``device_type`` ("cpu", "cuda", ...) multiplies bf16
    natively: a CPU with AMX or AVX512-BF16 (:func:`cpu_has_native_bf16`), a GPU with compute capability >= 8.0.
    Elsewhere bf16 is emulated, slower than fp32. Neither asked for: nothing to check."""
    setting = "bf16" if bf16 else "bf16_sampling" if bf16_sampling else None
    if setting is None:
        return
    if device_type == "cpu" and not cpu_has_native_bf16():
        raise ValueError(
            f"{setting}=True: this CPU has neither AMX nor AVX512-BF16, so torch would emulate bf16, slower than "
            f"fp32; set {setting}=False."
        )
    if device_type == "cuda" and not supports_bf16(detect_cuda_capability()):
        raise ValueError(
            f"{setting}=True: this GPU has no native bf16 (compute capability < 8.0); set {setting}=False."
        )
    if device_type not in ("cpu", "cuda"):
        raise ValueError(
            f"{setting}=True is for CPU and CUDA; the model is on {device_type}: set {setting}=False."
        )


def supports_bf16(capability: tuple[int, int] | None) -> bool:
    """True only for native bf16: CUDA compute capability >= 8.0."""
    return capability is not None and tuple(capability) >= BF16_MIN_CAPABILITY


#: What the default fp32 on CPU gives up, by the CPU's bf16 hardware (:func:`cpu_bf16_kind`), as measured.
CPU_BF16_NOTE = {
    "amx": "this CPU has AMX: the standalone loop's opt-in bf16=True made a step 1.30x faster on a 2-core Xeon "
    "with AMX (README.md)",
    "avx512_bf16": "this CPU has AVX512-BF16 but no AMX: the standalone loop's opt-in bf16=True ran at about "
    "fp32's speed on such a CPU (7.50 s against 7.62-8.02 s a step, README.md)",
    None: "this CPU has neither AMX nor AVX512-BF16: bf16 would be emulated, slower than fp32, and "
    "bf16=True is refused",
}


def choose_precision(
    device: str, capability: tuple[int, int] | None = None, *, cpu_bf16: str | None = None
) -> Precision:
    """Pure rule: device ("cuda" | "mps" | "cpu") and, for CUDA, its compute capability -> Precision.
    ``cpu_bf16`` (the CPU's bf16 hardware, :func:`cpu_bf16_kind`) only changes the CPU's reason text."""
    if device not in ("cuda", "mps", "cpu"):
        raise ValueError(f"unknown device {device!r}; use 'cuda', 'mps' or 'cpu'.")
    if device == "cuda":
        if capability is None:
            raise ValueError(
                "choose_precision('cuda') needs the GPU's compute capability, e.g. (7, 5) for a T4."
            )
        name = f"sm_{capability[0]}{capability[1]}"
        if supports_bf16(capability):
            return Precision(
                "cuda", "bfloat16", True, False, f"CUDA {name} has native bf16 (compute capability >= 8.0)."
            )
        return Precision(
            "cuda",
            "float16",
            False,
            True,
            f"CUDA {name} has no native bf16 (needs compute capability >= 8.0; "
            "torch.cuda.is_bf16_supported() may still say yes through emulation), so fp16 is used.",
        )
    if device == "mps":
        return Precision(
            "mps", "float32", False, False, "Apple MPS: fp32 (mixed precision training is unreliable there)."
        )
    if cpu_bf16 not in CPU_BF16_NOTE:
        raise ValueError(f"cpu_bf16={cpu_bf16!r}; use one of {list(CPU_BF16_NOTE)}.")
    return Precision("cpu", "float32", False, False, f"CPU: fp32 by default; {CPU_BF16_NOTE[cpu_bf16]}.")


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def detect_cuda_capability(device_index: int = 0) -> tuple[int, int] | None:
    """The compute capability of a visible CUDA GPU, or None without CUDA."""
    if not cuda_available():
        return None
    import torch

    return tuple(torch.cuda.get_device_capability(device_index))


def detect_precision(device: str | None = None) -> Precision:
    """The precision for this machine (or for ``device`` when given: "cpu" forces fp32 on a GPU box)."""
    import torch

    if device is None:
        if torch.cuda.is_available():
            device = "cuda"
        elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            device = "mps"
        else:
            device = "cpu"
    if device == "cuda":
        capability = detect_cuda_capability()
        if capability is None:
            raise RuntimeError("device='cuda' was asked for, but torch sees no CUDA GPU; use device='cpu'.")
        return choose_precision("cuda", capability)
    return choose_precision(device, cpu_bf16=cpu_bf16_kind() if device == "cpu" else None)


def require_cuda(feature: str, fix: str) -> None:
    """Raise a RuntimeError naming ``feature`` and the ``fix`` when no CUDA GPU is visible."""
    if not cuda_available():
        raise RuntimeError(f"{feature} needs a CUDA GPU, and torch sees none on this machine. {fix}")
