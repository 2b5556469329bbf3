"""srkit.torch.AdamW: a torch.optim.Optimizer whose step() runs srkit's fused
AdamW kernels (the CPU kernels for CPU tensors, the CUDA kernels on the
tensor's device and current stream) on the parameters' storage in place.

Random bits: parameter p's element i draws the bits of global element
offset(p) + i of the contract (seed, purpose, step, global index); see
docs/python.md. By default parameters are packed in order, each starting at a
multiple of 64 elements, which is sr-train's flat layout when the model's
tensors are given in its order; a group's "offsets" names them explicitly (a
shard passes the global index of its first element).
"""

import ctypes

import torch

from srkit import _capi
from srkit._capi import SrkitError

ALIGN = 64  # sr-train's kParamAlign (lib/model/param_layout.h)
_TORCH_DTYPE = {_capi.F32: torch.float32, _capi.BF16: torch.bfloat16}
_TELEMETRY_BYTES = ctypes.sizeof(_capi.Telemetry)


def _state_dtypes(rule):
    """State name -> torch dtype of the arrays the rule keeps (as sr-train checkpoints them)."""
    dtypes = {"exp_avg": _TORCH_DTYPE[rule.m], "exp_avg_sq": _TORCH_DTYPE[rule.v]}
    if rule.master == _capi.MASTER_F32:
        dtypes["master"] = torch.float32
    elif rule.master == _capi.MASTER_REM16:
        dtypes["master_rem16"] = torch.int16
    if rule.kahan:
        dtypes["kahan"] = torch.bfloat16
    return dtypes


class AdamW(torch.optim.Optimizer):
    """AdamW with srkit's precision strategies.

    strategy: the grammar of ``sr-train --strategy`` ("bf16-sr", "mixed",
    "bf16-sr:vround=sr", ...); the parameters must be of its weight dtype.
    seed: the random-bits seed (replicas with the same seed agree).
    Weight decay applies to a group when its weight_decay is nonzero, as
    sr-train decays matrices and embeddings only (put the rest in a group with
    weight_decay=0). telemetry: compute the rounding telemetry every step
    (srkit.torch.telemetry reads it); it costs the AVX-512 path on CPU.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                 strategy="bf16-sr", seed=0, telemetry=False):
        if not 0.0 < lr:
            raise ValueError(f"srkit.torch.AdamW: lr must be positive, got {lr}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"srkit.torch.AdamW: betas must be in [0, 1), got {betas}")
        if not 0 <= int(seed) < 2**64:
            raise ValueError(f"srkit.torch.AdamW: seed must be in [0, 2^64), got {seed}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        strategy=strategy, seed=int(seed))
        self.collect_telemetry = bool(telemetry)
        self._rules = {}
        self._plans = {}  # CUDA parameters: their plan blocks (device)
        self._telemetry = []
        super().__init__(params, defaults)

    # ---- groups ---------------------------------------------------------------
    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        self._rule(group, len(self.param_groups) - 1)
        names = group.get("param_names")
        group["names"] = list(names) if names else [
            f"param_groups[{len(self.param_groups) - 1}][{i}]" for i in range(len(group["params"]))]
        if "offsets" in group:
            offsets = [int(o) for o in group["offsets"]]
            if len(offsets) != len(group["params"]) or min(offsets, default=0) < 0:
                raise ValueError(f"srkit.torch.AdamW: group {len(self.param_groups) - 1}: "
                                 "offsets must hold one non-negative index per parameter")
        else:
            # Packed after every parameter placed so far, each at a multiple of ALIGN.
            at = 0
            for g in self.param_groups[:-1]:
                for p, o in zip(g["params"], g["offsets"]):
                    at = max(at, o + (p.numel() + ALIGN - 1) // ALIGN * ALIGN)
            offsets = []
            for p in group["params"]:
                offsets.append(at)
                at += (p.numel() + ALIGN - 1) // ALIGN * ALIGN
        group["offsets"] = offsets
        for name, p in zip(group["names"], group["params"]):
            self._check_param(name, p, self._rules[group["strategy"]])

    def _rule(self, group, index):
        spec = group["strategy"]
        if spec not in self._rules:
            try:
                self._rules[spec] = _capi.parse_strategy(spec)
            except SrkitError as e:
                raise SrkitError(f"srkit.torch.AdamW: group {index}: {e}") from None
        return self._rules[spec]

    @staticmethod
    def _check_param(name, p, rule):
        want = _TORCH_DTYPE[rule.weights]
        if type(p) is not torch.Tensor and type(p) is not torch.nn.Parameter:
            raise SrkitError(f"parameter {name}: expected a plain tensor, got {type(p).__name__} "
                             "(for a DTensor, pass its local shard and the shard's global offset)")
        if p.dtype != want:
            raise SrkitError(f"parameter {name}: strategy '{rule.spec}' stores weights as {want}, "
                             f"got {p.dtype}")
        if p.device.type not in ("cpu", "cuda"):
            raise SrkitError(f"parameter {name}: expected a cpu or cuda tensor, got {p.device}")
        if not p.is_contiguous():
            raise SrkitError(f"parameter {name}: expected a contiguous tensor")

    # ---- state ----------------------------------------------------------------
    def _init_state(self, p, rule):
        state = self.state[p]
        state["step"] = 0
        for key, dtype in _state_dtypes(rule).items():
            state[key] = torch.zeros(p.numel(), dtype=dtype, device=p.device)
        if "master" in state:  # the weights widened exactly, as sr-train starts its master
            state["master"].copy_(p.detach().reshape(-1).float())
        return state

    def load_state_dict(self, state_dict):
        # torch casts floating state to the parameter's dtype on load, which would
        # round an fp32 master or fp32 moments of bf16 weights: restore them as saved.
        saved = state_dict["state"]
        super().load_state_dict({"state": {}, "param_groups": state_dict["param_groups"]})
        params = [p for g in self.param_groups for p in g["params"]]
        for index, values in saved.items():
            p = params[int(index)]
            group = next(g for g in self.param_groups if any(q is p for q in g["params"]))
            dtypes = _state_dtypes(self._rules[group["strategy"]])
            state = {"step": int(values["step"])}
            for key, dtype in dtypes.items():
                t = values.get(key)
                if t is None or t.dtype != dtype or t.numel() != p.numel():
                    raise SrkitError(f"srkit.torch.AdamW.load_state_dict: state {index}: '{key}' "
                                     f"must be a {dtype} tensor of {p.numel()} elements")
                state[key] = t.detach().to(device=p.device, copy=True)
            self.state[p] = state

    # ---- the step --------------------------------------------------------------
    def last_telemetry(self):
        """Per group, the telemetry records of the last step's parameters."""
        return self._telemetry

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._telemetry = []
        for gi, group in enumerate(self.param_groups):
            rule = self._rule(group, gi)
            records = []
            for name, p, offset in zip(group["names"], group["params"], group["offsets"]):
                if p.grad is None:
                    continue
                self._check_param(name, p, rule)
                self._check_grad(name, p, rule)
                state = self.state[p] if self.state[p] else self._init_state(p, rule)
                state["step"] += 1
                records.append(self._step_one(name, p, offset, group, rule, state))
            self._telemetry.append([r for r in records if r is not None])
        return loss

    @staticmethod
    def _check_grad(name, p, rule):
        g = p.grad
        if g.is_sparse or g.layout != torch.strided:
            raise SrkitError(f"parameter {name}: sparse gradients are not supported "
                             "(expected a dense gradient)")
        want = _TORCH_DTYPE[rule.grads]
        if g.dtype != want:
            raise SrkitError(f"parameter {name}: strategy '{rule.spec}' needs {want} gradients, "
                             f"got {g.dtype}")
        if g.device != p.device or g.shape != p.shape or not g.is_contiguous():
            raise SrkitError(f"parameter {name}: expected a contiguous gradient of the "
                             f"parameter's shape on {p.device}")

    def _step_one(self, name, p, offset, group, rule, state):
        ptrs = {"weights": p.data_ptr(), "grads": p.grad.data_ptr(),
                "m": state["exp_avg"].data_ptr(), "v": state["exp_avg_sq"].data_ptr()}
        for key in ("master", "master_rem16"):
            if key in state:
                ptrs["master"] = state[key].data_ptr()
        if "kahan" in state:
            ptrs["kahan"] = state["kahan"].data_ptr()
        decay = group["weight_decay"] != 0
        hyper = (group["lr"], group["betas"][0], group["betas"][1], group["eps"],
                 group["weight_decay"], 1.0, group["seed"], state["step"])
        context = f"parameter {name}"
        if p.device.type == "cpu":
            tel = _capi.Telemetry() if self.collect_telemetry else None
            _capi.adamw_step_cpu(rule, ptrs, offset, p.numel(), decay, hyper, tel, context)
            return tel
        plan = self._plan(p, offset, decay, context)
        tel = (torch.zeros(_TELEMETRY_BYTES, dtype=torch.uint8, device=p.device)
               if self.collect_telemetry else None)
        with torch.cuda.device(p.device):
            stream = torch.cuda.current_stream(p.device).cuda_stream
            _capi.adamw_step_cuda(rule, ptrs, offset, p.numel(), decay, hyper, plan.data_ptr(),
                                  tel.data_ptr() if tel is not None else None, stream, context)
        return tel

    def _plan(self, p, offset, decay, context):
        key = (id(p), offset, decay)
        if key not in self._plans:
            if not _capi.has_cuda():
                raise SrkitError(f"{context}: this srkit library was built without CUDA")
            image = _capi.cuda_plan_image(offset, p.numel(), decay, context)
            host = torch.frombuffer(bytearray(image), dtype=torch.uint8)
            self._plans[key] = host.to(p.device)
        return self._plans[key]
