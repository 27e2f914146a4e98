"""The evaluation protocol: replay, grading, metrics, one configuration's job."""
