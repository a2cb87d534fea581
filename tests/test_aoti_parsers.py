"""The AOTI parsers on real captured logs: printer level 3 (launch trace) and level 2 (tensor statistics),
the generated wrapper's def-use graph."""
import pytest
from conftest import log

from aoti_bisect.aoti import level2_file, printer, wrapper


def test_level3_trace_cpu_and_cuda():
    t = printer.parse_trace(log("cpu/index_oob_level3.log").splitlines())
    assert t.unfinished == "cpp_fused_add_index_mul_sin_sum_0"
    t = printer.parse_trace(log("cuda/printer-level3-through-pty.log").splitlines())
    assert t.unfinished is None and t.last_finished == "triton_per_fused_mul_sum_1"
    assert list(dict.fromkeys(e.kernel for e in t.launches)) == ["aoti_torch_cuda_mm_out", "triton_poi_fused_add_relu_0", "shifted_copy_0",
                         "triton_per_fused_mul_sum_1"]
    assert len(t.launches) == 12  # three iterations of the model


def test_level2_blocks_cpu():
    views, inputs = printer.collect(printer.parse_blocks(log("cpu/nan_after_matmul_level2.log").splitlines()))
    k0 = views["cpp_fused_add_log_mul_relu_sub_0"]
    assert not printer.is_bad(k0.before["arg1_1"], None)
    assert printer.is_bad(k0.after["buf0"], None)
    assert k0.before["arg1_1"].size == "[4, 16]" and k0.before["arg1_1"].stride == "[16, 1]"
    assert printer.is_bad(views["aoti_torch_cpu_mm_out"].before["buf0"], None)
    assert set(inputs) == {"arg1_1"}


def test_level2_integer_range_against_assert_bound():
    views, _ = printer.collect(printer.parse_blocks(log("cpu/index_oob_level2_filtered.log").splitlines()), 16)
    idx = views["cpp_fused_add_index_mul_sin_sum_0"].before["arg1_1"]
    assert idx.dtype == "long int" and (idx.min, idx.max) == (0, 7)
    assert not printer.is_bad(idx, 16) and printer.is_bad(idx, 5)


def test_level2_scalar_on_same_line_as_next_header():
    text = ("[  before_launch - triton_poi_fused_0 - xnumel: 1024  ]\\n"
            "[  before_launch - triton_poi_fused_0 - buf0  ]:\n[ CUDAFloatType{4} ]\nNumber of elements: 4\n"
            "Dtype: float\nMean value: nan\nMin value: -nan\nMax value: inf\nDevice: cuda:0\nSize: [4]\n"
            "Stride: [1]\n")
    blocks = list(printer.parse_blocks(text.splitlines()))
    assert blocks[0].scalar == 1024 and blocks[1].arg == "buf0" and printer.is_bad(blocks[1], None)


def blocks_repr(pieces):
    return [repr(s) for s in printer.parse_blocks(pieces)]  # repr: nan == nan


@pytest.mark.parametrize("name", ["cpu/nan_after_matmul_level2.log", "cpu/index_oob_level2_filtered.log",
                                  "cuda/nan_triton_level2.log", "cuda/nan_triton_level2_filtered.log"])
def test_level2_pieces_read_as_lines(name, tmp_path):
    """A block read whole from a piece, or cut anywhere by a piece's end, gives what line-by-line gives."""
    lines = blocks_repr(log(name).splitlines())
    path = tmp_path / "l2.log"
    path.write_text(log(name))
    for size in (1, 7, 100, 1 << 20):
        assert blocks_repr(level2_file.read_pieces(str(path), size)) == lines


def test_level2_irregular_blocks_pieces_and_lines_agree(tmp_path):
    text = ("junk [  before_launch - k_0 - n: 5  ]\\n[  before_launch - k_0 - buf1  ]:\r\n"
            "Number of elements: 4\r\n  Dtype:  float \nfoo: bar\nMean value: nan\nMin value: 1\nMax value: 2\n"
            "Device: cpu\nSize: [4]\nStride: [1]\nDtype: int\n"  # after Stride: ignored
            "[  after_launch - k_0 - buf2  ]:\nStride: [1]\n"  # closed before its fields: no numel, no block
            "Number of elements: 4\nDtype: float\nMean value: 1\nMin value: 1\nMax value: 2\nDevice: cpu\n"
            "Size: [4]\nStride: [1]\n[  aoti_model_inputs - arg0_1  ]:\nNumber of elements: 2\nDtype: float\n")
    path = tmp_path / "l2.log"
    path.write_text(text)
    with open(path) as f:
        lines = list(printer.parse_blocks(f))
    assert [(s.arg, s.scalar, s.numel, s.dtype) for s in lines] == [("n", 5, 0, ""), ("buf1", None, 4, "float"),
                                                                   ("arg0_1", None, 2, "float")]
    assert printer.is_bad(lines[1], None) and lines[1].device == "cpu" and lines[2].when == "input"
    for size in (1, 3, 10, 1 << 20):
        assert blocks_repr(level2_file.read_pieces(str(path), size)) == [repr(s) for s in lines]


def test_wrapper_def_use_cpu():
    g = wrapper.parse_wrapper(log("cpu/wrapper_nan_after_matmul_level2.cpp"))
    assert [l.name for l in g.launches] == ["cpp_fused_add_log_mul_relu_sub_0", "aoti_torch_cpu_mm_out",
                                            "cpp_fused_mul_tanh_1"]
    k0, mm, k1 = g.launches
    assert k0.reads == ("arg1_1",) and k0.writes == ("buf0",)
    assert mm.reads == ("buf0", "w") and mm.writes == ("buf1",)
    assert g.storage("buf2") == "buf1" and k1.reads == ("buf1",) and k1.writes == ("buf1",)
    assert g.inputs == ["arg1_1"] and g.constants == ["w"] and g.outputs == ["buf2"]
    assert g.producer("buf2", 2).name == "aoti_torch_cpu_mm_out"
    assert [a.name for a in g.ancestors(k1)] == ["cpp_fused_add_log_mul_relu_sub_0", "aoti_torch_cpu_mm_out"]
    assert "aten.mm" in mm.source_nodes
    assert g.expected["arg1_1"] == ("4, 16", "16, 1")


def test_level3_trace_cuda_fault_names_the_user_kernel():
    assert printer.parse_trace(log("cuda/ima_user_triton_level3.log").splitlines()).unfinished == "gather_rows_0"
    t = printer.parse_trace(log("cuda/device_assert_oob_level3.log").splitlines())
    assert t.unfinished == "triton_poi_fused_add_index_mul_sin_0"


def test_level2_blocks_cuda():
    views, inputs = printer.collect(printer.parse_blocks(log("cuda/nan_triton_level2_filtered.log").splitlines()))
    k = views["triton_poi_fused_log_mul_0"]
    assert not printer.is_bad(k.before["arg0_1"], None) and printer.is_bad(k.after["buf0"], None)
    assert k.before["arg0_1"].device == "cuda:0" and set(inputs) == {"arg0_1", "arg1_1"}


def test_wrapper_def_use_cuda():
    g = wrapper.parse_wrapper(log("cuda/wrapper_ima_user_triton.cpp"))
    assert [l.name for l in g.launches] == ["gather_rows_0", "triton_poi_fused_mul_tanh_0", "aoti_torch_cuda_mm_out",
                                            "triton_per_fused_relu_sum_1"]
    gather, tanh, mm, red = g.launches
    assert gather.reads == ("arg0_1", "arg1_1") and gather.writes == ("buf0",)
    assert mm.reads == ("buf0", "buf2") and mm.writes == ("buf3",)
    assert [a.name for a in g.ancestors(red)] == [l.name for l in g.launches[:3]]
    g = wrapper.parse_wrapper(log("cuda/wrapper_nan_triton.cpp"))
    assert g.storage("buf2") == "buf1" and g.launches[2].reads == ("buf1",)
    assert g.producer("buf0", 1).name == "triton_poi_fused_log_mul_0"


def test_triton_kernel_name_from_assert_source():
    src = log("cuda/triton_kernel_device_assert_oob.py.txt")
    assert wrapper.triton_kernel_name(src) == "triton_poi_fused_add_index_mul_sin_0"


def test_wrapper_knows_its_device():
    assert wrapper.parse_wrapper(log("cuda/wrapper_nan_triton.cpp")).cuda
    assert not wrapper.parse_wrapper(log("cpu/wrapper_nan_after_matmul_level2.cpp")).cuda


def test_level2_header_after_a_field_on_its_line_pieces_and_lines_agree(tmp_path):
    """The header closes the block before its line's Stride is read, in a piece as line by line."""
    block = ("[  before_launch - k_0 - buf{}  ]:\n 1\nNumber of elements: 1\nDtype: float\nMean value: 1\n"
             "Min value: 1\nMax value: 1\nDevice: cpu\nSize: [1]\nStride: [1]")
    text = "\n".join([block.format(1), block.format(2) + " " + block.format(3), block.format(4)]) + "\n"
    path = tmp_path / "l2.log"
    path.write_text(text)
    lines = [repr(s) for s in printer.parse_blocks(text.splitlines())]
    assert [s.stride for s in printer.parse_blocks(text.splitlines())] == ["[1]", "", "[1]", "[1]"]
    assert blocks_repr(level2_file.read_pieces(str(path))) == lines


def views_repr(result):
    views, inputs = result
    return [(k, repr(v.before), repr(v.after)) for k, v in views.items()], repr(inputs)


def test_level2_read_in_parallel_ranges_as_in_one_go(tmp_path):
    """Cut at block headers (a log of one call: no model inputs) or at the starts of calls, and read by worker
    processes, a log folds to what one sequential read gives."""
    one = "".join(log(n) for n in ("cpu/nan_after_matmul_level2.log", "cpu/index_oob_level2_filtered.log",
                                   "cuda/nan_triton_level2.log"))
    single = "\n".join(line for line in one.splitlines() if "aoti_model_inputs" not in line) * 40
    # One bad value late in the log, after many good ones of the same kernel and argument.
    single += single.replace("Mean value: ", "Mean value: nan ", 1)
    calls = _calls(log("cpu/nan_after_matmul_level2.log"), 300, bad=(170, 250))
    for name, text in (("single", single), ("calls", calls)):
        path = tmp_path / f"{name}.log"
        path.write_text(text + "\r\n[  before_launch - k_9 - n: 3  ]\\n[  aoti_model_inputs - arg9_1  ]:\r\n"
                               "Number of elements: 1\nDtype: float\nMean value: inf\n")
        whole = level2_file.read_level2(str(path), 16, workers=1)
        for workers in (2, 3):
            assert views_repr(level2_file.read_level2(str(path), 16, workers=workers, parallel_from=0)) == \
                views_repr(whole), (name, workers)
        assert views_repr(whole) == views_repr(printer.collect(printer.parse_blocks(text.splitlines() + [
            "", "[  before_launch - k_9 - n: 3  ]\\n[  aoti_model_inputs - arg9_1  ]:", "Number of elements: 1",
            "Dtype: float", "Mean value: inf"]), 16))
    assert whole[1]["arg1_1"].mean == 170.5  # the calls' log: its first bad call


def _calls(one_call, n, bad=()):
    """A log of n calls of the model of `one_call` (a real level-2 log of one call, whose NaNs are made finite):
    call k's input has mean k + 0.5, and the calls in `bad` carry a NaN out of its last kernel."""
    good = one_call.replace("nan", "0.25")
    head, rest = good.split("Mean value: ", 1)
    last = rest.rsplit("Mean value: ", 1)
    return "".join(head + f"Mean value: {k + 0.5}" + rest[rest.index("\n"):] if k not in bad else
                   head + f"Mean value: {k + 0.5}" + last[0][last[0].index("\n"):] + "Mean value: nan" +
                   last[1][last[1].index("\n"):] for k in range(n))


def test_a_real_loop_is_read_at_the_call_that_made_the_nan_not_at_an_output_buffers_garbage():
    # scenarios/cpu/nan_fed_back.py under the level-2 printer, filtered to its two launches: eight calls, the fourth
    # makes the NaN and the later ones take it in. On the first call the addmm's output buffer held NaNs before the
    # addmm wrote it: memory it was given, not a value of the model's.
    text = log("cpu/nan_fed_back_level2_filtered.log")
    first, garbage = list(printer.parse_blocks(text.splitlines()[:30]))[:2]
    assert (first.when, first.arg) == ("input", "arg2_1")
    assert (garbage.when, garbage.arg) == ("before_launch", "buf0") and printer.is_bad(garbage, None)
    views, inputs = printer.collect(printer.parse_blocks(text.splitlines()))
    sqrt = views["cpp_fused_add_mul_sqrt_0"]
    assert not printer.is_bad(inputs["arg2_1"], None) and not printer.is_bad(sqrt.before["buf1"], None)
    assert printer.is_bad(sqrt.after["buf1"], None) and inputs["arg2_1"].mean != first.mean  # not the first call


def test_the_views_are_of_the_first_call_that_showed_a_bad_value_else_the_first():
    # A script that calls its model in a loop (a decoder feeding each output back in): one call's good inputs
    # beside another call's bad outputs would convict the wrong kernel, or the input fed back.
    one = log("cpu/nan_after_matmul_level2.log")
    views, inputs = printer.collect(printer.parse_blocks(_calls(one, 5, bad=(3,)).splitlines()))
    assert inputs["arg1_1"].mean == 3.5
    assert [k for k, v in views.items() if any(printer.is_bad(s, None) for s in v.after.values())]
    views, inputs = printer.collect(printer.parse_blocks(_calls(one, 5).splitlines()))
    assert inputs["arg1_1"].mean == 0.5 and not any(printer.is_bad(s, None) for v in views.values()
                                                    for s in (*v.before.values(), *v.after.values()))


def test_read_pieces_of_a_byte_range(tmp_path):
    path = tmp_path / "t.log"
    path.write_bytes("aé\r\nb\nc\rd\n".encode())
    assert "".join(level2_file.read_pieces(str(path), 1)) == "aé\nb\nc\nd\n"
    assert "".join(level2_file.read_pieces(str(path), 2, start=5, end=7)) == "b\n"


def test_a_user_triton_kernel_writes_what_its_body_stores_to_whatever_its_parameters_are_called():
    # A user kernel's parameters are the user's names: its body says which it writes. Read as a read, a user
    # kernel's store into a buffer an Inductor kernel filled made the fill look like the producer of the result.
    from aoti_bisect.aoti import wrapper
    with open("tests/logs/cuda/wrapper_ima_user_triton.cpp") as f:
        text = f.read()
    for renamed in (text, text.replace("out_ptr", "dst").replace("table_ptr", "src")):
        launch = wrapper.parse_wrapper(renamed, "w.cpp").by_name("gather_rows_0")[0]
        assert launch.writes == ("buf0",) and "buf0" not in launch.reads and "arg0_1" in launch.reads
