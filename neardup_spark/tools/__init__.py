"""Around the pipeline: calibration, evaluation, figures and plots, the corpus generator."""
