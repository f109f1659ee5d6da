"""Online evaluation (issue 39): a sample of live turns scored by the registry's evaluators.

:mod:`.sampling` is the ``after_commit`` hook that draws a turn against each enabled
:class:`~advisors_app.models.OnlineEvaluation` rule of its chain and label and queues one
:data:`.jobs.evaluate_turn` task per sampled rule; :mod:`.jobs` runs the rule's evaluators on
the stored turn and writes ``Score`` rows with ``source = "online"``.
"""
