"""A step of the view pipeline: a model that takes no images is sent none.

Its request carries each image's label in the text instead (where the image was), as stored;
the images themselves would be refused. Their count is already what this model's rule says
(nothing: see ``tokens.images``), so the entries keep their tokens. The images stay in the
history, for a model that takes them.
"""

from __future__ import annotations

from dataclasses import replace

from ..._core.vision import takes_images
from ..view.view import ViewBuild, ViewEntry
from . import step


@step("counting")
def images_for_model(build: ViewBuild) -> None:
    with_images = [i for i, e in enumerate(build.conversation) if e.message.images]  # only user messages carry them
    if not with_images or takes_images(build.counting.model):
        return
    for i in with_images:
        e = build.conversation[i]
        build.conversation[i] = ViewEntry(replace(e.message, images=()), e.kind, e.position, e.tokens)
