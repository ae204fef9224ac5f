"""A question with its content words masked: what a reader of the wording alone sees.

Every word outside ``CLOSED_CLASS`` (function words and the generic nouns of the templates) becomes
``MASK``. The bias report's text-only baselines (``tasks/balance/text_only.py``) and the blind baselines of
``reasonvqa evaluate`` (``tasks/evaluate/baselines.py``) group questions by this text.
"""

from __future__ import annotations

import polars as pl

MASK = "_"
CLOSED_CLASS = frozenset("""
a an the this that these those some any no not every each all both either neither other another same such
what which who whom whose where when why how many much more most less fewer least several few
is are was were be been being am do does did has have had can could will would shall should may might must
there here it its they them their he she his her we us our you your i me my one ones
of in on at to from by with without for about into onto over under above below beneath behind before after
between among near next left right front back top bottom side middle inside outside around across along
and or but than as if then so because while
image picture photo object objects thing things kind type part
""".split())


def masked(questions: pl.Series) -> pl.Series:
    """Each question lower-cased, cut into words (letters, digits, apostrophes), every word outside
    ``CLOSED_CLASS`` replaced by ``MASK``, joined by single spaces."""
    words = questions.str.to_lowercase().str.replace_all(r"[^a-z0-9']+", " ").str.strip_chars().str.split(" ")
    closed = pl.Series(sorted(CLOSED_CLASS))
    return words.list.eval(pl.when(pl.element().is_in(closed.implode())).then(pl.element()).otherwise(pl.lit(MASK))).list.join(" ")
