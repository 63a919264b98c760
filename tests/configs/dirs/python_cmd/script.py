import determined as det
