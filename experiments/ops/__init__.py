"""Operations: keeping runs intact, a team MLflow server, the UI check."""
