"""The app layer: view state and deep links (state.py), one module per tab (tabs/), rendering."""
