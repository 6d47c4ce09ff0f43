"""The written report: report.tex holds each question with the student's answer, the figures and the metrics."""

from __future__ import annotations

import json
import re
import shutil

import nbformat
import pytest

from helpers import cli
from helpers.course import report
from helpers.course.exercises import YOUR_ANSWER_PLACEHOLDER


def _student_notebook(path, answer: str):
    nb = nbformat.v4.new_notebook()
    cells = [
        ("md", "# 09 · A demo notebook\n\nIntro.", []),
        ("md", "**Question 9.1.** Is $\\alpha$ a distribution over the keys? Use `softmax`.", ["question"]),
        ("md", f"**Your answer.** {answer}", ["your-answer"]),
        ("code", "x = 1", []),
        ("md", "**Model answer.** The secret model answer.", ["answer"]),
        ("md", "**Question 9.2.** Why divide by √d?", ["question"]),
        ("md", f"**Your answer.** {YOUR_ANSWER_PLACEHOLDER}", ["your-answer"]),
    ]
    for kind, source, tags in cells:
        cell = nbformat.v4.new_markdown_cell(source) if kind == "md" else nbformat.v4.new_code_cell(source)
        cell.metadata["tags"] = tags
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path


def _figure_and_metrics(reports):
    import matplotlib.pyplot as plt

    from helpers.course.plotting import save_figure

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1], [1, 0])
    ax.set_title("Weights")
    save_figure(
        fig, "09_weights", reports / "figures", caption="Weights sum to one: 50% & more_than_half.", question="Q?"
    )
    plt.close(fig)
    (reports / "metrics").mkdir(parents=True, exist_ok=True)
    (reports / "metrics" / "09_scores.json").write_text(json.dumps({"bleu": {"new": 21.5, "test": 30.25}, "n": 1000}))


@pytest.fixture
def reports(tmp_path, monkeypatch):
    out = tmp_path / "reports"
    out.mkdir()
    monkeypatch.setenv("REPORTS_DIR", str(out))
    return out


def test_report_tex_holds_the_students_answers_figures_and_metrics(reports, tmp_path):
    answer = "Yes: every weight is positive and they sum to **one** (measured: 1 - 1e-16 at worst, $n = 5$)."
    nb = _student_notebook(tmp_path / "09_demo.ipynb", answer)
    _figure_and_metrics(reports)
    assert cli.main(["report", "--notebooks", str(nb)]) == 0
    tex = (reports / "report.tex").read_text()
    assert r"\section{Notebook 09: A demo notebook}" in tex
    assert r"\paragraph{Question 9.1.} Is $\alpha$ a distribution over the keys? Use \texttt{softmax}." in tex
    assert r"\textbf{Answer.} Yes: every weight is positive and they sum to \textbf{one}" in tex
    assert "(measured: 1 - 1e-16 at worst, $n = 5$)" in tex, "math is kept as written"
    assert "Why divide by $\\surd$d?" in tex and "(not answered yet" in tex, "an unanswered question says so"
    assert "secret model answer" not in tex, "model answers never reach the student's report"
    assert r"\includegraphics[width=\linewidth]{figures/09_weights.pdf}" in tex
    assert r"50\% \& more\_than\_half" in tex, "captions escaped"
    assert r"bleu.new & 21.5 \\" in tex and r"n & 1,000 \\" in tex, "metrics as a table"
    assert json.loads((reports / "answers" / "09.json").read_text())["questions"][0]["answered"] is True
    _check_structure(tex)


def _check_structure(tex: str) -> None:
    assert tex.count(r"\begin{document}") == 1 and tex.rstrip().endswith(r"\end{document}")
    opened = re.findall(r"\\begin\{(\w+)\}", tex)
    closed = re.findall(r"\\end\{(\w+)\}", tex)
    assert sorted(opened) == sorted(closed), "every environment is closed"
    body = re.sub(r"\$\$.*?\$\$|\\\[.*?\\\]|\$[^$]*\$", "", tex, flags=re.S)
    assert body.count("{") == body.count("}"), "braces balance outside math"
    text = body.split(r"\begin{document}")[1]
    text = re.sub(r"\\(includegraphics(\[[^\]]*\])?|label)\{[^}]*\}", "", text)  # file names and labels
    text = "\n".join(line for line in text.splitlines() if not line.rstrip().endswith("\\\\"))  # table rows
    assert not re.search(r"(?<!\\)[%&#_]", text), "no unescaped special character in the text"


def test_the_structure_check_can_fail():
    with pytest.raises(AssertionError):
        _check_structure("\\begin{document}\n\\begin{itemize}\n\\end{document}")
    with pytest.raises(AssertionError):
        _check_structure("\\begin{document}\n50% done\n\\end{document}")


def test_markdown_to_latex_lists_bold_code_and_display_math():
    text = "Two facts:\n- **first** with `x_1`\n- *second*\n\n$$\\alpha_i = \\frac{a}{b}$$\nDone."
    out = report.markdown_to_latex(text)
    assert "\\begin{itemize}\n\\item \\textbf{first} with \\texttt{x\\_1}\n\\item \\emph{second}\n\\end{itemize}" in out
    assert "\\[\\alpha_i = \\frac{a}{b}\\]" in out
    assert report._escape("→ α ≤ 2 漢") == r"$\rightarrow$ $\alpha$ $\le$ 2 [U+6F22]", (
        "unknown symbols shown, not dropped"
    )


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed here")
def test_report_tex_compiles_with_pdflatex(reports, tmp_path):
    nb = _student_notebook(tmp_path / "09_demo.ipynb", "Yes, $\\sum_i \\alpha_i = 1$; see Figure 1 — and 50 % more.")
    _figure_and_metrics(reports)
    assert cli.main(["report", "--notebooks", str(nb), "--pdf"]) == 0
    pdf = reports / "report.pdf"
    assert pdf.read_bytes()[:4] == b"%PDF"


def test_the_zip_hands_in_the_executed_notebooks_with_their_outputs(reports, tmp_path):
    """Issue 49: what the grader reads is the notebook itself: the one the answers came from (outputs kept), and for
    any other number the copy a headless run wrote to reports/executed/."""
    import zipfile

    mine = nbformat.read(_student_notebook(tmp_path / "09_demo.ipynb", "It is."), as_version=4)
    mine.cells[3].outputs = [nbformat.v4.new_output("stream", text="1 weights summed\n")]
    nbformat.write(mine, tmp_path / "09_demo.ipynb")
    (reports / "executed").mkdir()
    for name in ("08_other.ipynb", "09_demo.ipynb"):  # 09's headless copy: the student's own takes its place
        nbformat.write(nbformat.v4.new_notebook(), reports / "executed" / name)
    _figure_and_metrics(reports)
    assert cli.main(["report", "--notebooks", str(tmp_path / "09_demo.ipynb")]) == 0
    with zipfile.ZipFile(reports / "report.zip") as z:
        names = sorted(n for n in z.namelist() if n.startswith("notebooks/"))
        assert names == ["notebooks/08_other.ipynb", "notebooks/09_demo.ipynb"], names
        handed = nbformat.reads(z.read("notebooks/09_demo.ipynb").decode(), as_version=4)
    assert handed.cells[3].outputs[0]["text"] == "1 weights summed\n", "the executed notebook, outputs and all"
    assert "**Your answer.** It is." in handed.cells[2].source
