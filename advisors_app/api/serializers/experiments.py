"""Experiments (:mod:`advisors_app.api.views.experiments`): what the endpoints answer. Request
bodies are checked by :mod:`advisors_app.experiments.editing` (every field's errors at once);
these serializers describe and render the answers."""

from __future__ import annotations

from rest_framework import serializers

from advisors_app.models import Experiment, ExperimentArm

__all__ = [
    "ConcludeSerializer",
    "ExperimentArmSerializer",
    "ExperimentSerializer",
    "ExperimentWriteSerializer",
    "ReasonSerializer",
]


class ExperimentArmSerializer(serializers.ModelSerializer):
    """One arm: its name, version number, weight in basis points, and whether it is the
    control (the first arm)."""

    version = serializers.IntegerField(source="version.number")
    control = serializers.BooleanField(source="is_control")

    class Meta:
        model = ExperimentArm
        fields = ["name", "version", "weight", "control"]


class ExperimentSerializer(serializers.ModelSerializer):
    """An experiment with its arms (the salt stays on the server: it would let a caller
    compute everyone's arm)."""

    chain = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    arms = ExperimentArmSerializer(many=True, read_only=True)

    class Meta:
        model = Experiment
        fields = [
            "id",
            "chain",
            "name",
            "label",
            "status",
            "unit",
            "arms",
            "guardrails",
            "targeting",
            "ramp",
            "ramp_step",
            "winner",
            "revision",
            "created_at",
            "updated_at",
            "started_at",
            "ended_at",
        ]
        read_only_fields = fields


class ConcludeSerializer(serializers.Serializer):
    """``{"winner": "<arm name>"}``."""

    winner = serializers.CharField(max_length=100)


class ReasonSerializer(serializers.Serializer):
    """``{"reason"?}``: why the status changes (kept in the experiment's history)."""

    reason = serializers.CharField(max_length=500, required=False, allow_blank=True)


class _ArmWriteSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    version = serializers.IntegerField(help_text="A version number of the chain.")
    weight = serializers.IntegerField(help_text="Basis points; the arms sum to 10000.")


class ExperimentWriteSerializer(serializers.Serializer):
    """The body of ``POST`` (and, every field optional, ``PATCH``): described here, checked
    by :mod:`advisors_app.experiments.editing` with every field's errors at once."""

    name = serializers.CharField(max_length=200)
    label = serializers.CharField(max_length=50, default="production")
    unit = serializers.ChoiceField(choices=Experiment.Unit.choices, default="user")
    arms = _ArmWriteSerializer(many=True, help_text="The first arm is the control.")
    guardrails = serializers.ListField(
        child=serializers.DictField(), required=False, help_text='[{"metric", "max"|"min"}]'
    )
    targeting = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text='[{"arm", "users"|"groups"|"param" + "equals"|"in"}], first match wins',
    )
    ramp = serializers.DictField(
        required=False,
        help_text='{"steps": [basis points, ...], "min_turns": n}: the candidates\' share',
    )
