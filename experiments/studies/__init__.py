"""The paper's studies: the reproduction driver, the figures, the v2 selection and the
re-embedding study."""
