"""Writing a model directory the engine loads: config.json + model.safetensors.

What it teaches: safetensors is 8 bytes of little-endian header length, a
JSON header mapping each tensor name to {dtype, shape, data_offsets}, then
the raw little-endian data. Nothing else; no pickle, no code execution.
config.json uses the Hugging Face Llama keys plus "plab_tokenizer".

What it leaves out: dtypes other than F32, sharded checkpoints.
"""

import json
import os
import struct


def write_safetensors(path, tensors, metadata=None):
    """tensors: dict name -> numpy array (any float dtype, written as F32), in name order."""
    import numpy as np  # here, not at the top: tests/recipe reads hf_config where numpy is absent

    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name], dtype="<f4")
        raw = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)  # pad so the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def read_safetensors(path):
    import numpy as np  # see write_safetensors

    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", f"{path}: {name} is {info['dtype']}, only F32 is read here"
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(info["shape"])
    return out


def hf_config(cfg, tokenizer_name, tied):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": cfg["dim"],
        "num_hidden_layers": cfg["n_layers"],
        "num_attention_heads": cfg["n_heads"],
        "num_key_value_heads": cfg["n_kv_heads"],
        "head_dim": cfg["head_dim"],
        "intermediate_size": cfg["hidden_dim"],
        "vocab_size": cfg["vocab_size"],
        "max_position_embeddings": cfg["max_seq_len"],
        "rope_theta": cfg["rope_theta"],
        "rms_norm_eps": cfg["norm_eps"],
        "tie_word_embeddings": tied,
        "hidden_act": "silu",
        "torch_dtype": "float32",
        "bos_token_id": 256,
        "eos_token_id": 257,
        "plab_tokenizer": tokenizer_name,
    }


def save_model_dir(out_dir, cfg, tensors, tokenizer_name, tied, metadata=None):
    """tensors: HF names -> arrays. Writes out_dir/config.json and out_dir/model.safetensors."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(hf_config(cfg, tokenizer_name, tied), f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, metadata)


def torch_state_to_hf(model):
    """Our module names are already HF's except the MLP and the tied head."""
    out = {}
    for name, p in model.state_dict().items():
        n = "model." + name
        for part in ("gate_proj", "up_proj", "down_proj"):
            n = n.replace(f".{part}.", f".mlp.{part}.")
        for part in ("q_proj", "k_proj", "v_proj", "o_proj"):
            n = n.replace(f".{part}.", f".self_attn.{part}.")
        out[n] = p.detach().cpu().numpy()
    return out
