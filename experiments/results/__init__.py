"""A job's results on disk (the record) and their export to MLflow."""
