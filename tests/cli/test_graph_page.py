"""The page of ``halfway graph MODEL -o page.html`` in a headless Chromium (through selenium):
search finds ops by their ONNX names, a click shows the op's attributes and the dtypes and
shapes of its tensors as the model file holds them (read with protobuf alone), and zoom and pan
move the drawing. Skips, saying why, where selenium, Chromium or its driver is missing."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from halfway.cli.report.graph import Edge, Graph, Node
from halfway.cli.report.graph_html import to_html
from halfway.proto import framework_pb2
from tests.support.clirun import RESNET_TINY, halfway, proto_of
from tests.support.graph_shapes import transformer

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra has it)")
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
ATTR_FIELDS = {"INT": "i", "FLOAT": "f", "STRING": "s", "INTS": "ints", "FLOATS": "floats", "STRINGS": "strings",
               "BOOLEAN": "b", "BOOLEANS": "bools", "LONG": "l", "LONGS": "longs", "FLOAT64": "float64",
               "FLOAT64S": "float64s"}
"""Where an attribute of each type keeps its value in framework.proto's OpDesc.Attr."""
DTYPES = {"FP32": "float32", "FP16": "float16", "INT64": "int64", "INT32": "int32"}
SCALE = re.compile(r"scale\(([-\d.]+)\)")
TRANSLATE = re.compile(r"translate\(([-\d.]+),([-\d.]+)\)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    binary = next((found for name in BROWSERS if (found := shutil.which(name))), None)
    driver_binary = shutil.which("chromedriver")
    if binary is None or driver_binary is None:
        pytest.skip("no headless browser: install Chromium and its driver (Debian: apt-get install chromium "
                    "chromium-driver; .ci/run does this as root)")
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,900"):
        options.add_argument(flag)
    options.binary_location = binary
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(driver_binary))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("page") / "resnet.html"
    done = halfway("graph", RESNET_TINY, "-o", out)
    assert done.returncode == 0, done.stderr
    return out.as_uri()


def _proto_ops() -> list[Any]:
    return list(proto_of(RESNET_TINY).blocks[0].ops)


def _proto_var(name: str) -> tuple[str, list[int]]:
    var = next(v for v in proto_of(RESNET_TINY).blocks[0].vars if v.name == name)
    tensor = var.type.dense_tensor.tensor
    return DTYPES[framework_pb2.VarType.Type.Name(tensor.data_type)], list(tensor.dims)


def _attr_value(attr: Any) -> Any:
    kind = type(attr).DESCRIPTOR.fields_by_name["type"].enum_type.values_by_number[attr.type].name
    value = getattr(attr, ATTR_FIELDS[kind])
    return value if isinstance(value, (int, float, str, bool)) else list(value)


def _transform(browser: Any) -> tuple[float, float, float]:
    text = browser.find_element(By.ID, "viewport").get_attribute("transform")
    (x, y), k = TRANSLATE.search(text).groups(), SCALE.search(text)[1]
    return float(x), float(y), float(k)


def _errors(browser: Any) -> list[str]:
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def _rows(browser: Any, selector: str) -> list[list[str]]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"#details table.{selector} tr")
    return [[cell.text for cell in row.find_elements(By.CSS_SELECTOR, "th, td")] for row in rows]


def test_search_by_onnx_name_and_click_shows_the_ops_attributes_and_tensors(browser: Any, page: str) -> None:
    browser.get(page)
    ops = _proto_ops()
    convs = [i for i, op in enumerate(ops) if op.type in ("conv2d", "depthwise_conv2d")]
    assert convs
    box = browser.find_element(By.ID, "search")
    box.send_keys("Conv")
    marked = {g.get_attribute("data-id") for g in browser.find_elements(By.CSS_SELECTOR, ".node.match")}
    assert {f"op{i}" for i in convs} <= marked
    results = browser.find_elements(By.CSS_SELECTOR, "#results li")
    assert len(results) == len(marked) and "found" in browser.find_element(By.ID, "count").text
    first = convs[0]
    next(r for r in results if r.get_attribute("data-id") == f"op{first}").click()
    op = ops[first]
    assert browser.find_element(By.CSS_SELECTOR, "#details h2").text.startswith(op.type)
    shown = {name: text for name, text in _rows(browser, "attrs")}
    compared = 0
    for attr in op.attrs:
        kind = type(attr).DESCRIPTOR.fields_by_name["type"].enum_type.values_by_number[attr.type].name
        if kind in ATTR_FIELDS:
            assert json.loads(shown[attr.name]) == pytest.approx(_attr_value(attr)), attr.name
            compared += 1
    assert compared >= 4 and "strides" in shown
    inputs = _rows(browser, "inputs")[1:]  # after the header row
    expected = [(slot.parameter, name) for slot in op.inputs for name in slot.arguments]
    assert [(slot, name) for slot, name, _, _ in inputs] == expected
    for _, name, dtype, shape in inputs + _rows(browser, "outputs")[1:]:
        assert (dtype, json.loads(shape)) == _proto_var(name)
    selected = browser.find_elements(By.CSS_SELECTOR, ".node.selected")
    assert [g.get_attribute("data-id") for g in selected] == [f"op{first}"]
    assert browser.find_elements(By.CSS_SELECTOR, ".edge.on")  # its edges stand out
    assert _errors(browser) == []


def test_enter_steps_through_matches_and_centres_them(browser: Any, page: str) -> None:
    browser.get(page)
    relus = [i for i, op in enumerate(_proto_ops()) if op.type == "relu"]
    box = browser.find_element(By.ID, "search")
    box.send_keys("Relu")
    box.send_keys(Keys.ENTER)
    first = browser.find_element(By.CSS_SELECTOR, ".node.selected").get_attribute("data-id")
    box.send_keys(Keys.ENTER)
    second = browser.find_element(By.CSS_SELECTOR, ".node.selected").get_attribute("data-id")
    assert first != second and {first, second} <= {f"op{i}" for i in relus}
    rect = browser.find_element(By.CSS_SELECTOR, ".node.selected rect").rect
    canvas = browser.find_element(By.ID, "canvas").rect
    centre = (rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2)
    assert abs(centre[0] - (canvas["x"] + canvas["width"] / 2)) < 2
    assert abs(centre[1] - (canvas["y"] + canvas["height"] / 2)) < 2


def test_zoom_and_pan_change_the_transform(browser: Any, page: str) -> None:
    browser.get(page)
    x, y, k = _transform(browser)
    browser.find_element(By.ID, "zoom-in").click()
    assert _transform(browser)[2] == pytest.approx(k * 1.25, rel=1e-3)
    browser.find_element(By.ID, "zoom-out").click()
    browser.find_element(By.ID, "zoom-out").click()
    assert _transform(browser)[2] == pytest.approx(k * 0.8, rel=1e-3)
    canvas = browser.find_element(By.ID, "canvas")
    before = _transform(browser)
    ActionChains(browser).move_to_element_with_offset(canvas, -300, -200).click_and_hold() \
        .move_by_offset(120, 70).release().perform()
    after = _transform(browser)
    assert (after[0] - before[0], after[1] - before[1]) == pytest.approx((120, 70), abs=2)
    browser.execute_script("arguments[0].dispatchEvent(new WheelEvent('wheel', {deltaY: -200, clientX: 500, "
                           "clientY: 400, bubbles: true, cancelable: true}))", canvas)
    assert _transform(browser)[2] > after[2]
    browser.find_element(By.ID, "fit").click()
    fitted = _transform(browser)
    nodes = browser.find_element(By.ID, "viewport").rect
    assert nodes["height"] <= canvas.rect["height"] + 1 and nodes["width"] <= canvas.rect["width"] + 1
    assert fitted != after


def test_edges_carry_their_tensor_and_a_click_names_it(browser: Any, page: str) -> None:
    browser.get(page)
    image = next(v for v in proto_of(RESNET_TINY).blocks[0].vars if v.name == "image")
    labels = [t.get_attribute("textContent") for t in browser.find_elements(By.CSS_SELECTOR, "#labels text")]
    dims = list(image.type.dense_tensor.tensor.dims)
    assert f"image float32{dims}" in labels
    hit = browser.find_element(By.CSS_SELECTOR, ".edge-hit[data-var='image']")
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", hit)
    assert browser.find_element(By.CSS_SELECTOR, "#details h2").text == "image"
    assert len(browser.find_elements(By.CSS_SELECTOR, ".edge.on")) == 1


def test_a_thousand_op_page_fits_the_screen_and_finds_an_op(browser: Any, tmp_path) -> None:
    sizes, edges = transformer(84)
    nodes = tuple(Node(name, f"{name}\nfloat32", "float32", False, f"op {name}") for name in sizes)
    graph = Graph(nodes, tuple(Edge(s, t, "float32[1, 128, 768]", f"{s}.out") for s, t, _ in edges))
    page = tmp_path / "big.html"
    page.write_text(to_html(graph, "big"))
    browser.get(page.as_uri())
    assert len(browser.find_elements(By.CSS_SELECTOR, ".node")) == len(sizes) > 1000
    browser.find_element(By.ID, "fit").click()
    drawn, canvas = browser.find_element(By.ID, "viewport").rect, browser.find_element(By.ID, "canvas").rect
    assert drawn["width"] <= canvas["width"] + 1 and drawn["height"] <= canvas["height"] + 1
    assert drawn["width"] > canvas["width"] / 2 or drawn["height"] > canvas["height"] / 2  # and fills it
    box = browser.find_element(By.ID, "search")
    box.send_keys("gelu.83")
    box.send_keys(Keys.ENTER)
    assert browser.find_element(By.CSS_SELECTOR, ".node.selected").get_attribute("data-id") == "gelu.83"
    assert _transform(browser)[2] >= 0.9 and _errors(browser) == []
