"""Tests of the prefill_lab Python module (src/python), run by ctest with /usr/bin/python3.

What they prove (issue 16):
  * toy:         the module's toy outputs are 2, 3, 14/3, 6 (as numpy computes by hand), for
                 every chunk plan and backend, bit for bit;
  * equivalence: chunked == full prefill bit for bit through the module on cpu-ref (logits,
                 every K and V, the attention maps), gpu-ref equal to cpu-ref;
  * cli:         what the module returns equals what the `plab` CLI prints with --json:
                 attention probabilities (`plab prefill --attention L:H`, cell by cell, and
                 `plab eval`'s per-head previous-token scores, which are sums of them), logits of every position (its loss and
                 accuracy), `plab prefill`'s first token, top-k, KV blocks and equivalence
                 report, `plab generate`'s tokens;
  * errors:      bad input raises prefill_lab.Error, a ValueError, whose message is the
                 CLI's one line after "plab: error: " (a bad chunk plan first);
  * session:     the probes and the KV cache agree with each other (rows of probabilities
                 sum to 1 and equal softmax(scores); the pool read through the block table
                 is the K/V; a decode step equals prefilling one token more).

Usage: test_module.py CLASS   (one ctest entry per class; see tests/python/CMakeLists.txt)
Environment: PYTHONPATH holds the built module; PLAB_CLI is the built `plab`.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import prefill_lab as pl

PLAB = os.environ.get("PLAB_CLI", "")


def plab(*args, expect_ok=True):
    """Runs the built plab CLI; returns (exit code, stdout, stderr)."""
    r = subprocess.run([PLAB, *args], capture_output=True, text=True, timeout=120)
    if expect_ok and r.returncode != 0:
        raise AssertionError(f"plab {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.returncode, r.stdout, r.stderr


def bits(a):
    """The bit patterns of a float32 array: equal bits means bitwise-equal floats
    (and tells +0 from -0 and NaN payloads apart, which == would not)."""
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def seeded_prompt(n, seed, vocab):
    """n random token ids, seeded, never all the same."""
    return [int(x) for x in np.random.default_rng(seed).integers(0, vocab, size=n)]


MODEL = pl.load_model()  # the shipped model (or $PLAB_MODEL, as the CLI)


class Toy(unittest.TestCase):
    def test_outputs_are_2_3_14_over_3_6_for_every_plan_and_backend(self):
        values = np.array([2, 4, 8, 10], dtype=np.float64)
        # By hand: all scores equal, so output p is the mean of values 0..p.
        by_hand = np.array([values[: p + 1].mean() for p in range(4)])
        self.assertEqual(list(by_hand[:2]), [2.0, 3.0])
        self.assertAlmostEqual(by_hand[2], 14 / 3, places=15)
        self.assertEqual(by_hand[3], 6.0)
        expected = by_hand.astype(np.float32)  # 2, 3, float32(14/3), 6
        for backend in pl.backends():
            for plan in pl.chunk_plans(4):
                text = ",".join(map(str, plan))
                r = pl.toy(chunks=text, backend=backend)
                with self.subTest(backend=backend, plan=text):
                    self.assertEqual(r["plan"], plan)
                    np.testing.assert_array_equal(bits(r["outputs"]), bits(expected))
        r = pl.toy()
        self.assertEqual(r["exact"][2], "14/3 = mean of v0..v2")
        # Causal probabilities: row p is 1/(p+1) on keys 0..p and 0 after.
        p = r["probs"]
        for q in range(4):
            np.testing.assert_allclose(p[q, : q + 1], 1 / (q + 1), rtol=1e-6)  # float32 softmax
            self.assertTrue((p[q, q + 1 :] == 0).all())

    def test_equals_plab_toy_json(self):
        _, out, _ = plab("toy", "--values", "2,4,8,10", "--json")
        cli = json.loads(out)
        r = pl.toy()
        np.testing.assert_array_equal(r["outputs"], np.array(cli["full"], dtype=np.float32))
        np.testing.assert_array_equal(r["probs"].ravel(), np.array(cli["probs"], dtype=np.float32))
        self.assertEqual(r["exact"], cli["exact"])


class Equivalence(unittest.TestCase):
    V = MODEL.config["vocab_size"]

    def test_chunked_equals_full_bitwise_on_cpu_ref(self):
        engine = pl.Engine(MODEL, "cpu-ref")
        tokens = [MODEL.bos_id] + seeded_prompt(36, seed=16, vocab=self.V)  # 37: no plan divides
        full = engine.prefill(tokens, attention="all", all_logits=True)
        L = MODEL.config["n_layers"]
        self.assertGreater(np.abs(full.last_logits).max(), 0)  # never compare zeros
        self.assertGreater(np.abs(full.k(L - 1)).max(), 0)
        for plan in ["1", "5", "16", "3,1,4,29", "36,1"]:
            s = engine.prefill(tokens, chunks=plan, attention="all", all_logits=True)
            with self.subTest(plan=plan):
                self.assertEqual(sum(s.plan), len(tokens))
                np.testing.assert_array_equal(bits(s.last_logits), bits(full.last_logits))
                np.testing.assert_array_equal(bits(s.logits), bits(full.logits))
                for layer in range(L):
                    np.testing.assert_array_equal(bits(s.k(layer)), bits(full.k(layer)))
                    np.testing.assert_array_equal(bits(s.v(layer)), bits(full.v(layer)))
                np.testing.assert_array_equal(bits(s.attention_probs), bits(full.attention_probs))
                report = engine.equivalence(tokens, chunks=plan)
                self.assertTrue(report["bitwise"], report)
                self.assertEqual(report["logits_max_abs_diff"], 0.0)

    def test_snapshots_gpu_ref_equals_cpu_ref_bitwise(self):
        tokens = [MODEL.bos_id] + seeded_prompt(12, seed=7, vocab=self.V)
        a = pl.Engine(MODEL, "cpu-ref").snapshot(tokens, chunks="full")
        b = pl.Engine(MODEL, "gpu-ref").snapshot(tokens, chunks="5")
        self.assertEqual(b.plan, [5, 5, 3])
        d = pl.compare(a, b)
        self.assertTrue(d["bitwise"], d)
        np.testing.assert_array_equal(bits(a.k), bits(b.k))
        self.assertEqual(a.k.shape, (4, 13, 2, 32))

    def test_fast_backend_differences_are_small_and_reported(self):
        tokens = [MODEL.bos_id] + seeded_prompt(20, seed=3, vocab=self.V)
        ref = pl.Engine(MODEL, "cpu-ref").snapshot(tokens)
        fast = pl.Engine(MODEL, "cpu").snapshot(tokens, chunks="7")
        d = pl.compare(ref, fast)
        # The report's max |diff| is the one numpy sees in the arrays it returns.
        self.assertEqual(d["logits_max_abs_diff"],
                         float(np.abs(ref.last_logits.astype(np.float64) - fast.last_logits).max()))
        # The fast backends' promise (lesson 4, `plab compare`): GEMM blocking reorders sums,
        # so max |diff| <= 1e-5 * max |cpu-ref logit|, with the same greedy token.
        self.assertGreater(d["logits_max_abs_diff"], 0)  # a fast path, not the reference
        self.assertLessEqual(d["logits_max_abs_diff"], 1e-5 * np.abs(ref.last_logits).max())
        self.assertTrue(d["same_first_token"])


class Cli(unittest.TestCase):
    """The module against the CLI's --json output, on cpu-ref (bitwise-reproducible)."""

    def test_attention_probabilities_equal_plab_prefill_json_probes(self):
        # `plab prefill --json --attention L:H,...` prints each probed head's (T, T)
        # probabilities; the module's, for the same prompt, plan and mask, are the same
        # floats cell by cell (JSON keeps a float32 exactly: it prints the shortest
        # decimal that reads back as the same double).
        tokens = [MODEL.bos_id] + seeded_prompt(23, seed=9, vocab=MODEL.config["vocab_size"])
        heads = [(0, 1), (1, 3), (3, 0)]
        engine = pl.Engine(MODEL, "cpu-ref")
        for chunks, mask in [("5", "causal"), ("full", "window:6+sink:1")]:
            _, out, _ = plab("prefill", "--tokens", ",".join(map(str, tokens)), "--chunks", chunks,
                             "--mask", mask, "--backend", "cpu-ref", "--repeats", "1",
                             "--attention", ",".join(f"{l}:{h}" for l, h in heads), "--json")
            cli = json.loads(out)["attention"]
            s = engine.prefill(tokens, chunks=chunks, mask=mask, attention=heads)
            self.assertEqual([(a["layer"], a["head"]) for a in cli], heads)
            for a in cli:
                want = np.array(a["probs"], dtype=np.float64)
                got = s.attention(a["layer"], a["head"]).astype(np.float64)
                self.assertEqual(want.shape, (len(tokens), len(tokens)))
                np.testing.assert_array_equal(got, want, err_msg=f"{mask} {chunks} {a['layer']}:{a['head']}")
                self.assertGreater(np.count_nonzero(want), len(tokens))  # not all zero

    def test_attention_probabilities_equal_plab_eval_head_scores(self):
        # `plab eval --json` reports, per (layer, head), the mean attention a query pays to
        # the position before it over held-out stories, from the engine's attention probes:
        # a sum of the very probabilities the module returns. Summed here in the same order
        # in double, the two agree exactly when every probability is bitwise the same.
        src = os.path.join(pl.default_model_path(), "eval", "heldout.txt")  # beside the shipped model
        with open(src, encoding="utf-8") as f:
            stories = [line.rstrip("\r\n") for line in f if line.strip() and not line.startswith("#")][:3]
        self.assertEqual(len(stories), 3)
        with tempfile.TemporaryDirectory() as tmp:
            heldout = os.path.join(tmp, "heldout.txt")
            with open(heldout, "w", encoding="utf-8") as f:
                f.write("\n".join(stories) + "\n")
            _, out, _ = plab("eval", "--backend", "cpu-ref", "--heldout", heldout, "--stories", "3",
                             "--max-completions", "0", "--trials", "1", "--induction-len", "2",
                             "--json")
        cli = json.loads(out)
        c = MODEL.config
        engine = pl.Engine(MODEL, "cpu-ref")
        sums = np.zeros(c["n_layers"] * c["n_heads"])
        count = 0
        loss_sum, correct, predictions = 0.0, 0, 0
        for story in stories:
            ids = MODEL.encode(story, bos=True)[: c["max_seq_len"]]
            s = engine.prefill(ids, attention="all")
            probs = s.attention_probs  # (L*H, T, T), layer-major as eval lists heads
            for h in range(len(sums)):
                acc = sums[h]
                for t in range(1, len(ids)):
                    acc += float(probs[h, t, t - 1])  # double, in eval's order
                sums[h] = acc
            count += len(ids) - 1
            # Loss and accuracy over [BOS] story [EOS] from the logits of every position.
            ids_eos = (ids + [MODEL.eos_id])[: c["max_seq_len"]]
            logits = engine.prefill(ids_eos, all_logits=True).logits.astype(np.float64)
            for t in range(len(ids_eos) - 1):
                row = logits[t]
                mx = row.max()
                loss_sum += mx + np.log(np.exp(row - mx).sum()) - row[ids_eos[t + 1]]
                correct += int(np.argmax(row) == ids_eos[t + 1])
                predictions += 1
        self.assertEqual(len(cli["heads"]), len(sums))
        for h, head in enumerate(cli["heads"]):
            self.assertEqual((head["layer"], head["head"]), divmod(h, c["n_heads"]))
            self.assertEqual(head["previous_token"], sums[h] / count, f"head {head}")
        self.assertGreater(max(h["previous_token"] for h in cli["heads"]), 0.3)  # not all zero
        self.assertEqual(cli["predictions"], predictions)
        self.assertEqual(cli["next_token_accuracy"], correct / predictions)
        # numpy's exp and pairwise sum vs glibc's exp and a sequential sum, both in double
        # over the same float32 logits: they differ in the last bits of each term only.
        self.assertAlmostEqual(cli["loss"], loss_sum / predictions, delta=1e-12 * cli["loss"])

    def test_prefill_json_first_token_top_kv_and_equivalence(self):
        tokens = [MODEL.bos_id] + seeded_prompt(40, seed=5, vocab=MODEL.config["vocab_size"])
        for chunks, mask in [("4", "causal"), ("full", "window:8+sink:2")]:
            _, out, _ = plab("prefill", "--tokens", ",".join(map(str, tokens)), "--chunks", chunks,
                             "--mask", mask, "--backend", "cpu-ref", "--block-size", "8",
                             "--repeats", "1", "--top", "5", "--json")
            cli = json.loads(out)
            s = pl.Engine(MODEL, "cpu-ref").prefill(tokens, chunks=chunks, mask=mask, block_size=8)
            with self.subTest(chunks=chunks, mask=mask):
                self.assertEqual(cli["tokens"], s.tokens)
                self.assertEqual(cli["plan"], ",".join(map(str, s.plan)))
                self.assertEqual(cli["first_token"]["id"], s.first_token)
                self.assertEqual([(t["id"], t["text"], t["prob"]) for t in cli["top"]],
                                 [(i, text, np.float32(p).item()) for i, text, p in s.top(5)])
                self.assertEqual(cli["kv_blocks"], s.blocks_in_use)
                self.assertEqual(cli["kv_bytes"], s.kv_bytes)
                report = pl.Engine(MODEL, "cpu-ref").equivalence(tokens, chunks=chunks, mask=mask,
                                                                 block_size=8)
                self.assertEqual(cli["compared_plan"], report["compared_plan"])
                for key in ["logits_max_abs_diff", "kv_max_abs_diff", "logits_bitwise",
                            "kv_bitwise", "same_first_token"]:
                    self.assertEqual(cli["equivalence"][key], report[key], key)

    def test_generate_json_tokens(self):
        _, out, _ = plab("generate", "--tokens", "256,72,105", "-n", "6", "--no-stop",
                         "--backend", "cpu-ref", "--chunks", "2,1", "--repeats", "1", "--json")
        cli = json.loads(out)
        r = pl.Engine(MODEL, "cpu-ref").generate([256, 72, 105], max_new_tokens=6, chunks="2,1",
                                                  stop_at_eos=False)
        self.assertEqual(r["new_tokens"], cli["new_tokens"])
        self.assertEqual(r["text"], cli["text"])
        self.assertEqual(len(r["decode_step_ms"]), 5)
        self.assertGreaterEqual(r["ttft_ms"], r["prefill_ms"])
        names = [e["name"] for e in r["trace"]]
        self.assertEqual(names.count("decode step"), 5)
        self.assertEqual(names.count("prefill chunk"), 2)
        ttft = next(e for e in r["trace"] if e["name"] == "time to first token")
        self.assertAlmostEqual(ttft["dur_us"] / 1000, r["ttft_ms"], delta=1e-9)


class Errors(unittest.TestCase):
    """Bad input: prefill_lab.Error (a ValueError) with the CLI's one-line message."""

    def assert_same_error(self, cli_args, call):
        rc, _, err = plab(*cli_args, expect_ok=False)
        self.assertEqual(rc, 1, err)
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("plab: error: "), err)
        with self.assertRaises(ValueError) as caught:
            call()
        self.assertIsInstance(caught.exception, pl.Error)
        self.assertEqual("plab: error: " + str(caught.exception), lines[0])

    def test_bad_chunk_plan_is_a_value_error_with_the_cli_message(self):
        engine = pl.Engine(MODEL, "cpu-ref")
        for plan in ["2,2", "0", "3,x", "1,,2"]:
            with self.subTest(plan=plan):
                self.assert_same_error(
                    ["prefill", "--tokens", "256,72,105", "--chunks", plan],
                    lambda: engine.prefill([256, 72, 105], chunks=plan))
                self.assert_same_error(
                    ["prefill", "--tokens", "256,72,105", "--chunks", plan],
                    lambda: pl.chunk_plan(plan, 3))

    def test_chunk_plan_the_mask_forbids(self):
        engine = pl.Engine(MODEL, "cpu-ref")
        self.assert_same_error(
            ["prefill", "--tokens", "256,72,105,1", "--mask", "prefix:3", "--chunks", "1,3"],
            lambda: engine.prefill([256, 72, 105, 1], mask="prefix:3", chunks="1,3"))

    def test_other_bad_input(self):
        self.assert_same_error(["prefill", "--tokens", "256,72", "--mask", "window:0"],
                               lambda: pl.Engine(MODEL).prefill([256, 72], mask="window:0"))
        self.assert_same_error(["prefill", "--backend", "tpu"], lambda: pl.Engine(MODEL, "tpu"))
        self.assert_same_error(["prefill", "--model", "/nonexistent/model"],
                               lambda: pl.load_model("/nonexistent/model"))
        self.assert_same_error(["prefill", "--prompt", ""], lambda: pl.Engine(MODEL).prefill(""))
        self.assert_same_error(["toy", "--values", "1,2", "--chunks", "1,2"],
                               lambda: pl.toy([1, 2], chunks="1,2"))

    def test_python_type_errors(self):
        with self.assertRaises(pl.Error) as caught:
            pl.Engine(MODEL).prefill([256, 1.5])
        self.assertIn("is not a token id", str(caught.exception))
        with self.assertRaises(pl.Error) as caught:
            pl.Engine(MODEL).prefill([256, 72]).attention(0, 0)
        self.assertIn("was not probed", str(caught.exception))
        with self.assertRaises(pl.Error) as caught:
            pl.Engine(MODEL).prefill([256, 72], attention=[(0, "a")])
        self.assertIn("is not a (layer, head) pair", str(caught.exception))
        with self.assertRaises(pl.Error) as caught:  # the runtime's own range check
            pl.Engine(MODEL).prefill([256, 72], attention=[(9, 0)])
        self.assertIn("layer 9", str(caught.exception))


class Session(unittest.TestCase):
    def test_probes_are_consistent(self):
        engine = pl.Engine(MODEL, "cpu-ref")
        s = engine.prefill("Once upon a time, Lily", chunks="3", attention=[(1, 2), (3, 0)],
                           scores=True, all_logits=True)
        T = s.length
        self.assertEqual(s.probes, [(1, 2), (3, 0)])
        self.assertEqual(s.attention_probs.shape, (2, T, T))
        np.testing.assert_array_equal(bits(s.logits[-1]), bits(s.last_logits))
        for layer, head in s.probes:
            p, sc = s.attention(layer, head), s.scores(layer, head)
            self.assertTrue((p[np.triu_indices(T, 1)] == 0).all())  # the future is masked
            self.assertTrue(np.isneginf(sc[np.triu_indices(T, 1)]).all())
            # float32 probabilities, each row a float32 softmax: sums within 1e-5.
            np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-5)
            # softmax of the scores in numpy: the backend's strict expf vs numpy's differ in ulps.
            e = np.exp(sc.astype(np.float64) - sc.max(axis=1, keepdims=True))
            np.testing.assert_allclose(p, e / e.sum(axis=1, keepdims=True), atol=1e-6)

    def test_kv_pool_through_block_table_and_decode_step(self):
        engine = pl.Engine(MODEL, "cpu-ref")
        tokens = [MODEL.bos_id] + seeded_prompt(20, seed=11, vocab=MODEL.config["vocab_size"])
        s = engine.prefill(tokens[:-1], chunks="6", block_size=4)
        self.assertEqual(len(s.block_table), 5)  # 20 positions in blocks of 4
        self.assertEqual(s.blocks_in_use, 5)
        B = s.block_size
        for layer in range(MODEL.config["n_layers"]):
            for part, kv in (("k", s.k(layer)), ("v", s.v(layer))):
                pool = s.pool(layer, part)
                from_pool = np.stack([pool[s.block_table[p // B], p % B] for p in range(s.length)])
                np.testing.assert_array_equal(bits(from_pool), bits(kv))
        # A decode step of the last token equals prefilling it with the rest (reference backend).
        step = s.decode_step(tokens[-1])
        whole = engine.prefill(tokens)
        np.testing.assert_array_equal(bits(step), bits(whole.last_logits))
        self.assertEqual(s.tokens, tokens)
        np.testing.assert_array_equal(bits(s.k(2)), bits(whole.k(2)))
        # extend: the rest of a prompt given in a second part, any plan.
        part = engine.prefill(tokens[:8])
        part.extend(tokens[8:], chunks="5")
        np.testing.assert_array_equal(bits(part.last_logits), bits(whole.last_logits))
        self.assertEqual(part.query_pos0, 8)

    def test_trace_spans(self):
        s = pl.Engine(MODEL, "cpu-ref").prefill([256, 72, 105, 33, 10], chunks="2", block_size=2)
        chunks = [e for e in s.trace if e["name"] == "prefill chunk"]
        self.assertEqual([e["args"]["length"] for e in chunks], ["2", "2", "1"])
        appends = [e for e in s.trace if e["name"] == "kv append" and e["args"]["layer"] == "0"]
        self.assertEqual([e["args"]["blocks"] for e in appends],
                         [str(s.block_table[0]), str(s.block_table[1]), str(s.block_table[2])])
        prefill = next(e for e in s.trace if e["name"] == "prefill")
        self.assertGreaterEqual(prefill["dur_us"], sum(e["dur_us"] for e in chunks))
        self.assertIn('"traceEvents"', s.trace_json())

    def test_random_model_equals_plab_random_model(self):
        with tempfile.TemporaryDirectory() as tmp:
            plab("random-model", tmp, "--seed", "4")
            a = pl.Engine(pl.load_model(tmp), "cpu-ref").prefill([256, 1, 2, 3])
        b = pl.Engine(pl.random_model("small", seed=4), "cpu-ref").prefill([256, 1, 2, 3])
        np.testing.assert_array_equal(bits(a.last_logits), bits(b.last_logits))

    def test_masks(self):
        m = pl.mask_matrix("window:3+sink:1", 6)
        _, out, _ = plab("mask", "window:3+sink:1", "--length", "6", "--tile", "2", "--json")
        cli = json.loads(out)
        self.assertEqual(["".join("x" if v else "." for v in row) for row in m], cli["rows"])
        tiles = pl.mask_tiles("window:3+sink:1", 6, 2)
        self.assertEqual(["".join(".PF"[v] for v in row) for row in tiles], cli["tile_map"])
        s = pl.Engine(MODEL).prefill([256, 1, 2, 3, 4, 5], mask="window:3+sink:1",
                                     attention=[(0, 0)])
        self.assertTrue((s.attention(0, 0)[~m] == 0).all())  # masked cells get no weight
        self.assertTrue((s.attention(0, 0)[m] > 0).all())


def main(name):
    """Runs one test class; fails when it runs no test (a renamed class must not pass)."""
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(globals()[name])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if result.testsRun == 0:
        print(f"{name}: no tests ran", file=sys.stderr)
        return 1
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in globals():
        sys.exit("usage: test_module.py Toy|Equivalence|Cli|Errors|Session")
    if not PLAB or not os.access(PLAB, os.X_OK):
        sys.exit("PLAB_CLI must name the built plab binary")
    sys.exit(main(sys.argv[1]))
