"""Built-in models as layer lists: gradient sizes from the architecture, compute from FLOPs.

Compute time of a layer = its FLOPs x batch_per_rank / device_tflops (a sustained rate,
not a peak); backward = 2 x forward (input and weight gradients). These are first-order
estimates to put communication in context, not kernel timings.

- resnet50: the 54 weighted layers of ResNet-50 at 224 x 224 (conv1, 16 bottleneck blocks
  with 4 projection shortcuts, fc1000); fp32 gradients, 102,011,648 B in all, the size of
  ASTRA-sim's Resnet50_DataParallel workload (docs/model.md §8.1).
- transformer: Megatron-style blocks of hidden h and sequence s, each an attention and an
  MLP layer; with tensor parallelism t each does one all-reduce of b*s*h*2 B forward and
  one backward, and all-reduces its 1/t share of fp16 gradients (4h^2 and 8h^2 parameters)
  over the data-parallel group (docs/model.md §8.2).
- dlrm: ASTRA-sim's DLRM_HybridParallel sizes (docs/model.md §8.1): an embedding all-to-all
  of 98,304 B forward and backward, and MLP weight gradients of 3,191,808 B in all.

Memory (``params``, ``activation_bytes``; docs/parallel.md): a ResNet-50 layer keeps its fp32
output map; a Transformer block keeps s b h (10 + 24 / t) bytes (Korthikanti et al., 2022,
selective recomputation without sequence parallelism), half in each of its two layers. DLRM's
MLP activations are left out (a few KB) and its embedding tables are not in the model.
"""

from ..config.schema import Layer, LayerComm, Model

# ResNet-50: (blocks, width, output side) per stage; bottleneck expansion 4
RESNET50_STAGES = ((3, 64, 56), (4, 128, 28), (6, 256, 14), (3, 512, 7))


def _layer(
    name: str,
    flops_per_sample: float,
    model: Model,
    grad_bytes: int,
    params: int = 0,
    activation_bytes: int = 0,
    **comm,
) -> Layer:
    forward_ns = flops_per_sample * model.batch_per_rank / (model.device_tflops * 1e12) * 1e9
    return Layer(
        name=name,
        forward_ns=forward_ns,
        backward_ns=2 * forward_ns,
        weight_grad_bytes=grad_bytes,
        params=params,
        activation_bytes=activation_bytes,
        **comm,
    )


def resnet50(model: Model) -> list[Layer]:
    layers = []

    def conv(name, k, cin, cout, side):
        params = k * k * cin * cout
        layers.append(
            _layer(
                name, 2 * params * side * side, model, 4 * params, params, 4 * cout * side * side * model.batch_per_rank
            )
        )

    conv("conv1", 7, 3, 64, 112)
    cin, prev_side = 64, 56
    for s, (blocks, width, side) in enumerate(RESNET50_STAGES):
        for b in range(blocks):
            tag = f"s{s + 1}b{b + 1}"
            conv(f"{tag}.a", 1, cin, width, prev_side if b == 0 else side)
            conv(f"{tag}.b", 3, width, width, side)
            conv(f"{tag}.c", 1, width, 4 * width, side)
            if b == 0:
                conv(f"{tag}.down", 1, cin, 4 * width, side)
            cin = 4 * width
        prev_side = side
    layers.append(_layer("fc", 2 * 2048 * 1000, model, 4 * 2048 * 1000, 2048 * 1000, 4 * 1000 * model.batch_per_rank))
    return layers


def transformer(model: Model, tp: int = 1) -> list[Layer]:
    h, s, b = model.hidden, model.sequence, model.batch_per_rank
    activations = b * s * h * 2  # fp16
    tp_ar = LayerComm(kind="all_reduce", bytes=activations)
    layers = []
    kept = s * b * h * (10 + 24 / tp) / 2  # per layer: half a block's (docs/parallel.md)
    for i in range(model.layers or 4):
        attention = (8 * s * h * h + 4 * s * s * h) / tp
        mlp = 16 * s * h * h / tp
        layers.append(
            _layer(
                f"block{i}.attn",
                attention,
                model,
                2 * 4 * h * h // tp,
                4 * h * h // tp,
                int(kept),
                forward_comm=tp_ar,
                backward_comm=tp_ar,
            )
        )
        layers.append(
            _layer(
                f"block{i}.mlp",
                mlp,
                model,
                2 * 8 * h * h // tp,
                8 * h * h // tp,
                int(kept),
                forward_comm=tp_ar,
                backward_comm=tp_ar,
            )
        )
    return layers


def dlrm(model: Model) -> list[Layer]:
    a2a = LayerComm(kind="all_to_all", bytes=98_304, group="dp", algorithm="direct")
    sizes = {
        "bot_mlp0": 13_312,
        "bot_mlp1": 524_288,
        "top_mlp0": 524_288,
        "top_mlp1": 524_288,
        "top_mlp2": 524_288,
        "top_mlp3": 16_384,
        "top_out": 1_064_960,
    }
    layers = [
        _layer(name, 2 * size / 4, model, size, size // 4) for name, size in sizes.items() if name.startswith("bot")
    ]
    layers.append(Layer(name="embedding", forward_comm=a2a, backward_comm=a2a))
    layers += [
        _layer(name, 2 * size / 4, model, size, size // 4) for name, size in sizes.items() if name.startswith("top")
    ]
    return layers


def model_layers(model: Model, tp: int = 1) -> list[Layer]:
    if model.name == "resnet50":
        return resnet50(model)
    if model.name == "transformer":
        return transformer(model, tp)
    return dlrm(model)
