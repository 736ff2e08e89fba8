"""A step of the view pipeline: every image within its API's limits, as it will be sent.

An image over a limit of the request's API (pixels a side, bytes, the many-images rule; see
:mod:`slotmagic.providers._image_limits`) is downscaled in the view, its aspect kept, and its
entry counted again: the preview, the budget and the request show the image as it is sent. The
stored image stays whole (a model with other limits gets it whole). One that cannot be
downscaled, and a request over the API's count of images, are refused when the request is made.
"""

from __future__ import annotations

from dataclasses import replace

from ...providers._image_limits import fitted, image_limits, target
from ..view.view import ViewBuild, ViewEntry
from . import step


@step("wire", "counting")
def images_within_limits(build: ViewBuild) -> None:
    limits = image_limits(build.wire)
    if limits is None:
        return
    with_images = [i for i, e in enumerate(build.conversation) if e.message.images]
    if not with_images:
        return
    count = sum(len(build.conversation[i].message.images) for i in with_images)
    side, size = target(limits, count)
    for i in with_images:
        entry = build.conversation[i]
        images = tuple(fitted(image, side, size) or image for image in entry.message.images)
        if images != entry.message.images:
            message = replace(entry.message, images=images)
            build.conversation[i] = ViewEntry(message, entry.kind, entry.position, build.counting.count(message))
