"""references"""
