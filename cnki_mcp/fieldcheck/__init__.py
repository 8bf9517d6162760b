"""fieldcheck"""
