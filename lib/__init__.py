"""Pure algorithms that belong to no app: no Django imports, tested without a database.

Sits beside ``metrics/`` at the bottom of the layer order (README "Layers"): image hashing and
the Hamming multi-index search, OCR and text-free image variants.
"""
