"""Static checks on a candidate: its source (library rules, stage techniques) and its object."""
from .audit import audit_object
from .source import check_source
from .stages import (STAGES, TECHNIQUES, detect_techniques, missing_techniques,
                     stage_violations)

__all__ = ["STAGES", "TECHNIQUES", "audit_object", "check_source", "detect_techniques",
           "missing_techniques", "stage_violations"]
