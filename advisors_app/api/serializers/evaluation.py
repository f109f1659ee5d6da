"""Two evaluation runs compared, item by item and per score key
(:mod:`advisors_app.api.views.evaluation`; the body is
:meth:`advisors_app.evaluation.compare.Comparison.to_dict`)."""

from __future__ import annotations

from rest_framework import serializers

__all__ = ["EvalRunComparisonSerializer"]


class _ScoreComparisonSerializer(serializers.Serializer):
    key = serializers.CharField()
    baseline_mean = serializers.FloatField(allow_null=True)
    candidate_mean = serializers.FloatField(allow_null=True)
    delta = serializers.FloatField(
        allow_null=True, help_text="Mean of candidate minus baseline over the paired items."
    )
    ci_low = serializers.FloatField(allow_null=True, help_text="Bootstrap 95 % interval, low.")
    ci_high = serializers.FloatField(allow_null=True, help_text="Bootstrap 95 % interval, high.")
    paired = serializers.IntegerField(help_text="Items both runs scored with a number.")
    regressed = serializers.IntegerField()
    improved = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    baseline_pass_rate = serializers.FloatField(allow_null=True)
    candidate_pass_rate = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "EvalScoreComparison"


class _ItemComparisonSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="The dataset item's key.")
    status = serializers.ChoiceField(choices=["regressed", "improved", "unchanged"])
    deltas = serializers.DictField(
        child=serializers.FloatField(allow_null=True),
        help_text="Score key → candidate minus baseline (null: not both numbers).",
    )
    baseline = serializers.DictField(help_text='Score key → {"value", "passed", "comment"}.')
    candidate = serializers.DictField(help_text='Score key → {"value", "passed", "comment"}.')
    baseline_error = serializers.CharField()
    candidate_error = serializers.CharField()
    regressed = serializers.ListField(child=serializers.CharField())
    improved = serializers.ListField(child=serializers.CharField())

    class Meta:
        ref_name = "EvalItemComparison"


class EvalRunComparisonSerializer(serializers.Serializer):
    """The comparison of two runs (see the module docstring)."""

    baseline = serializers.IntegerField(help_text="Run a's id.")
    candidate = serializers.IntegerField(help_text="Run b's id.")
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="regressed, improved, unchanged, only_baseline, only_candidate (items).",
    )
    scores = serializers.DictField(child=_ScoreComparisonSerializer())
    items = _ItemComparisonSerializer(many=True)
    only_baseline = serializers.ListField(child=serializers.CharField())
    only_candidate = serializers.ListField(child=serializers.CharField())
    bootstrap = serializers.DictField(help_text="resamples, seed, confidence.")

    class Meta:
        ref_name = "EvalRunComparison"
