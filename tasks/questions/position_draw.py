"""Which absent objects take the identification form ("What is the object above the <absent>?"), per shard.

The form has one hallucination question per real one (hallucination.identification_slots), so an image takes
only a few of its absent objects with a basis there. They are drawn over the shard's images at once, so that the
form names as many different classes as the images allow: its answers ("There is no curb in the image.") form
their own balancing group (tasks/balance/groups.py), where answer balancing's ``max_ratio`` cuts every answer
that repeats among the group's top ones, and the hallucination share then thins the real identification
questions to match (tasks/balance/hallucination_share.py).

Repeats are what the co-occurrence basis invites: on a small corpus few of an image's labels take part in its
estimate, so many images hold the same few improbable labels (those never seen with their common labels: on the
50 VG images 11 labels are improbable for almost every image that has any). Taking the first ones of each image's
list named "curb" 5 times among 26 position questions and lost 9 of them to ``max_ratio``.

The draw: images with the fewest options first (then by id); each slot takes, among the image's options not yet
taken, the name the shard's position questions name least so far, then the name fewest images of the shard could
take (leaving the widely held ones for the images that have nothing else), then the strongest basis
(absence_bases.ABSENT_OBJECT_BASES), then a stable hash of (image, label). Deterministic for a shard.
"""

from __future__ import annotations

from collections import Counter

from reasonvqa.absence_bases import ABSENT_OBJECT_BASES
from reasonvqa.tasks.questions.absence import AbsentLabel
from reasonvqa.tasks.questions.grounded import stable_order


def _basis_rank(basis: str | None) -> int:
    return ABSENT_OBJECT_BASES.index(basis) if basis in ABSENT_OBJECT_BASES else len(ABSENT_OBJECT_BASES)


def draw_positions(options: dict[str, list[tuple[AbsentLabel, str]]], slots: dict[str, int]) -> dict[str, list[AbsentLabel]]:
    """image -> at most ``slots[image]`` of its ``options`` ((absent label with a basis, the name questions use) of
    the absent objects that passed every check), in the options' order."""
    offered = Counter(name for found in options.values() for name in {name for _, name in found})
    named: Counter = Counter()
    out: dict[str, list[AbsentLabel]] = {}
    for image_id in sorted(options, key=lambda i: (len({name for _, name in options[i]}), i)):
        left = list(options[image_id])
        taken: list[AbsentLabel] = []
        while left and len(taken) < slots.get(image_id, 0):
            choice, name = min(left, key=lambda o: (named[o[1]], offered[o[1]], _basis_rank(o[0].basis),
                                                    stable_order(image_id, o[0].label, "position")))
            named[name] += 1
            taken.append(choice)
            left = [o for o in left if o[0] is not choice]
        out[image_id] = [choice for choice, _ in options[image_id] if any(choice is t for t in taken)]
    return out
