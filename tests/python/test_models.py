"""Real architectures with random weights, built in-test (no downloads), through
torch.compile(backend="kiln") against eager PyTorch: torchvision ResNet-18 and MobileNetV3-small at
a small resolution, Hugging Face BERT and GPT-2 from small configs (dynamic sequence length)."""
import pytest

from torch_helpers import assert_close, assert_varies, fresh, torch

torchvision = pytest.importorskip("torchvision", reason="torchvision is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")


def run_both(model, *args, dynamic=None):
    kt = fresh()
    compiled = torch.compile(model, backend="kiln", dynamic=dynamic)
    with torch.no_grad():
        got, want = compiled(*args), model(*args)
    return kt, got, want


def kiln_aten_ops(kt):
    return {op for r in kt.REPORTS for p in r.partitions if p.runs_on == "kiln" for op in p.aten_ops}


def calibrate_norms(model):
    """Random affine batch-norm parameters and statistics measured on a random batch (momentum 1).
    torchvision's init leaves the norms as identities, and MobileNetV3's activations then shrink
    until its logits hardly depend on the input: a test on such outputs checks nothing."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.momentum = 1.0
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
            elif isinstance(m, torch.nn.Linear):
                m.weight.normal_(0, 0.2)
        model.train()
        model(torch.randn(8, 3, 48, 48))
    return model.eval()


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small"])
def test_torchvision_cnn(name):
    torch.manual_seed(0)
    model = calibrate_norms(getattr(torchvision.models, name)(num_classes=17))
    x = torch.randn(2, 3, 48, 48)
    kt, got, want = run_both(model, x)
    assert_close(got, want, dict(rtol=1e-3, atol=1e-3))
    assert_varies(got)
    assert (got[0] - got[1]).abs().max() > 1e-4  # the two images give different logits
    # Everything that computes ran in Kiln: convolutions, norms, pools, the classifier.
    assert not [n for r in kt.REPORTS for n in r.torch_nodes if "view" not in n.op], [r.to_text() for r in kt.REPORTS]
    assert {"convolution", "_native_batch_norm_legit_no_training", "addmm"} <= kiln_aten_ops(kt)
    assert kt.STATS["fallback_partitions"] == 0


def bert():
    cfg = transformers.BertConfig(vocab_size=97, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=96, max_position_embeddings=64)
    return transformers.BertModel(cfg).eval()


def gpt2():
    cfg = transformers.GPT2Config(vocab_size=97, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    return transformers.GPT2Model(cfg).eval()


@pytest.mark.parametrize("make", [bert, gpt2], ids=["bert", "gpt2"])
def test_huggingface_transformer_dynamic_sequence(make):
    torch.manual_seed(0)
    model = make()
    kt = fresh()
    compiled = torch.compile(model, backend="kiln", dynamic=True)
    with torch.no_grad():
        for t in (5, 9, 16):
            ids = torch.randint(0, 97, (2, t))
            got = compiled(input_ids=ids).last_hidden_state
            want = model(input_ids=ids).last_hidden_state
            assert got.shape == (2, t, 64)
            assert_close(got, want, dict(rtol=1e-3, atol=1e-3))
            assert_varies(got)
            assert (got[:, 0] - got[:, -1]).abs().max() > 1e-3  # positions differ
    assert kt.STATS["graphs"] == 1, kt.STATS  # one compile for every sequence length
    ops = kiln_aten_ops(kt)
    assert "_scaled_dot_product_flash_attention_for_cpu" in ops, ops  # attention kept whole
    assert "native_layer_norm" in ops and "addmm" in ops
    kiln_ops = {op for r in kt.REPORTS for p in r.partitions for op in p.kiln_ops}
    assert "attention" in kiln_ops, kiln_ops


def test_bert_bf16():
    torch.manual_seed(0)
    model = bert().to(torch.bfloat16)
    ids = torch.randint(0, 97, (2, 11))
    kt, got, want = run_both(model, ids)
    got, want = got.last_hidden_state, want.last_hidden_state
    assert got.dtype == torch.bfloat16
    assert_close(got.float(), want.float(), dict(rtol=5e-2, atol=5e-2))
    assert_varies(got)


def test_torchvision_vit_runs_attention_in_kiln():
    torch.manual_seed(0)
    model = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                                 hidden_dim=64, mlp_dim=96, num_classes=10).eval()
    with torch.no_grad():
        model.heads.head.weight.normal_(0, 0.2)  # torchvision zero-initialises the head
    kt, got, want = run_both(model, torch.randn(3, 3, 32, 32))
    assert_close(got, want, dict(rtol=1e-4, atol=1e-4))
    assert_varies(got)
    # nn.MultiheadAttention's inference fast path (_native_multi_head_attention) is lowered too.
    assert "_native_multi_head_attention" in kiln_aten_ops(kt)
    assert not [n for r in kt.REPORTS for n in r.torch_nodes], [r.to_text() for r in kt.REPORTS]


def test_llama_dynamic_sequence_all_in_kiln():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaModel(cfg).eval()
    kt = fresh()
    compiled = torch.compile(model, backend="kiln", dynamic=True)
    with torch.no_grad():
        for t in (4, 10, 17):
            ids = torch.randint(0, 97, (2, t))
            got = compiled(input_ids=ids).last_hidden_state
            assert_close(got, model(input_ids=ids).last_hidden_state, dict(rtol=1e-3, atol=1e-3))
            assert_varies(got)
    assert kt.STATS["graphs"] == 1
    assert not [n for r in kt.REPORTS for n in r.torch_nodes], [r.to_text() for r in kt.REPORTS]


def test_mixtral_expert_routing_runs_partly_in_torch_and_says_so():
    torch.manual_seed(0)
    cfg = transformers.MixtralConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                                     num_experts_per_tok=2, max_position_embeddings=64)
    model = transformers.MixtralModel(cfg).eval()
    ids = torch.randint(0, 97, (2, 9))
    with torch.no_grad():
        want = model(input_ids=ids).last_hidden_state
    import kiln
    report = kiln.explain_torch(model, ids)
    got = report.output.last_hidden_state
    assert_close(got, want, dict(rtol=1e-3, atol=1e-3))
    assert_varies(got)
    in_torch = {op for op, _ in report.torch_ops}
    assert any("histc" in op or "grouped_mm" in op for op in in_torch), str(report)  # the expert dispatch
    ops = {op for p in report.kiln_partitions for op in p.aten_ops}
    assert "_scaled_dot_product_flash_attention_for_cpu" in ops and "topk" in ops and "sort" in ops, ops
