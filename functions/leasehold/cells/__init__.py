"""Cells with a home Region (issue 48): each Region a full Leasehold deployment, a small
control table (an MRSC global table) holding each tenant's home and each cell's Region lease.

``install(app)`` (from :mod:`leasehold.compose`, when ``LEASEHOLD_CELL_REGION`` is set) makes
this cell refuse to lease or finish jobs while it does not hold its Region lease, and the
API answer ``421 Misdirected`` to a submission for a tenant homed elsewhere. See
docs/design.md, "Regions: cells with a home Region", and docs/regions.md.
"""

from leasehold.cells.cell import Cell, install
from leasehold.cells.control import ControlTable, Home, RegionRecord

__all__ = ["Cell", "ControlTable", "Home", "RegionRecord", "install"]
