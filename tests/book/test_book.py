"""The book's structure: every chapter has its exercise and solution notebooks, in the table of contents."""

from helpers import CHAPTERS, ROOT, toc_pages


def test_every_chapter_has_an_exercise_and_a_solution_in_reading_order():
    names = [f"ch{p.name[:2]}" for p in CHAPTERS]  # chapters/07_making_... -> ch07
    assert len(names) >= 7 and names == [f"ch{i:02d}" for i in range(1, len(names) + 1)]
    assert sorted(p.stem for p in (ROOT / "exercises").glob("*.ipynb")) == names
    assert sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb")) == names
    lesson = [page for page in toc_pages() if page.startswith(("chapters/", "exercises/"))]
    assert lesson == [page for chapter, name in zip(CHAPTERS, names)
                      for page in (f"chapters/{chapter.stem}", f"exercises/{name}")]
