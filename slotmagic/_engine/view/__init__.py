"""The request's view: what it is made from, the pipeline that makes it, the previews kept, and
the budget it shows. Its steps are the extension point in :mod:`slotmagic._engine.steps`."""
