"""Serializers of ``/api/chains/<slug>/online-evaluations/`` (:mod:`..views.online`)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from advisors_app.models import ChatModelConfig, OnlineEvaluation
from advisors_app.online.rules import evaluators_errors, filters_errors

__all__ = ["OnlineEvaluationSerializer"]


class OnlineEvaluationSerializer(serializers.ModelSerializer):
    judge_model = serializers.SlugRelatedField(
        slug_field="slug",
        queryset=ChatModelConfig.objects.all(),
        required=False,
        allow_null=True,
    )
    sample_rate = serializers.FloatField(min_value=0.0, max_value=1.0)

    class Meta:
        model = OnlineEvaluation
        fields = (
            "id",
            "label",
            "arm",
            "sample_rate",
            "filters",
            "evaluators",
            "judge_model",
            "budget_usd",
            "spent_usd",
            "enabled",
            "stopped_reason",
            "created_at",
        )
        read_only_fields = ("id", "spent_usd", "stopped_reason", "created_at")

    def validate_evaluators(self, value: Any) -> Any:
        errors = evaluators_errors(value)
        if errors:
            raise serializers.ValidationError(errors)
        return value

    def validate_filters(self, value: Any) -> Any:
        errors = filters_errors(value or {})
        if errors:
            raise serializers.ValidationError(errors)
        return value or {}
