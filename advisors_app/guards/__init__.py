"""Guards in the Django layer: guard evaluation, the shipped guard dataset and the training of
the prompt-injection classifier (:mod:`.training`). The checks and the advisor are in the core
(:mod:`advisors_app.core.guards`, :mod:`advisors_app.core.advisors.guard`)."""
