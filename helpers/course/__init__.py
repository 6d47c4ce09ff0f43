"""The course machinery: the notebooks' first cell, Colab and Drive, headless runs, exercises and the grader,
the report, figures. Only the command line, the notebooks and the studies import it; model, data,
training and evaluation code never do (tests/test_package.py holds the rule).
"""
