import os

# One BLAS/OpenMP thread per process, set before NumPy loads (this package is imported first
# by manage.py, gunicorn and celery). Parallelism comes from worker processes; on a box that
# also serves pages, OpenBLAS's own threads contend with them and made the agreement bootstrap
# ~16x more CPU-expensive (bench/quality.py, 2 cores under load). A deployment that wants BLAS
# threads sets the variables itself.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from concord.celery import app as celery_app  # noqa: E402

__all__ = ("celery_app",)
